// The trainer's choice of activation dtype (and of the optimizer's fp32 compute copy), and the
// 16-bit optimizers driving a model with 16-bit activations on the host as the Trainer drives it:
// every parameter from weights(), no compute copy; bit for bit what the earlier wiring (GEMM
// weights from weights(), the rest from the compute copy) gave.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/error.h"
#include "model/gpt_model.h"
#include "model/init.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "ops/gradients.h"
#include "train/mixed_precision_optimizer.h"
#include "train/trainer.h"

namespace mds::train {
namespace {

using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

constexpr tensor::Device kHost{};
constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};

TEST(TrainerActivationDtype, AutoIs16BitOnlyOnACudaDevice) {
  EXPECT_EQ(activation_dtype(ActivationPrecision::kAuto, Precision::kBf16, kCuda0),
            DType::kBFloat16);
  EXPECT_EQ(activation_dtype(ActivationPrecision::kAuto, Precision::kFp16, kCuda0),
            DType::kFloat16);
  EXPECT_EQ(activation_dtype(ActivationPrecision::kAuto, Precision::kFp32, kCuda0),
            DType::kFloat32);
  EXPECT_EQ(activation_dtype(ActivationPrecision::kAuto, Precision::kBf16, kHost), DType::kFloat32);
  EXPECT_EQ(activation_dtype(ActivationPrecision::kAuto, Precision::kFp16, kHost), DType::kFloat32);
  EXPECT_EQ(activation_dtype(ActivationPrecision::kFp32, Precision::kBf16, kCuda0),
            DType::kFloat32);
  EXPECT_EQ(activation_dtype(ActivationPrecision::kParams, Precision::kBf16, kHost),
            DType::kBFloat16);
  EXPECT_EQ(activation_dtype(ActivationPrecision::kParams, Precision::kFp16, kHost),
            DType::kFloat16);
  EXPECT_EQ(activation_dtype(ActivationPrecision::kParams, Precision::kFp32, kHost),
            DType::kFloat32);
}

model::ModelOptions tiny_options(DType activations) {
  model::ModelOptions o;
  o.config.num_layers = 2;
  o.config.hidden_size = 32;
  o.config.num_attention_heads = 4;
  o.config.seq_length = 16;
  o.config.max_position_embeddings = 16;
  o.config.padded_vocab_size = 128;
  o.micro_batch_size = 2;
  o.activation_dtype = activations;
  return o;
}

// How the model reads its parameters with 16-bit activations.
enum class Wiring {
  kWeightsAlone,     // every parameter from weights(), the optimizer without a compute copy
  kWithComputeCopy,  // GEMM weights from weights(), the rest from the fp32 compute copy
};

struct TrainingOutcome {
  std::vector<double> losses;
  std::vector<std::uint8_t> weights, master;  // the final 16-bit weights and fp32 masters
  std::vector<double> weight_squares;         // per-parameter Σ w² of the final weights
  int skipped = 0;                            // fp16 overflow steps
};

std::vector<std::uint8_t> bytes_of(Tensor t) {
  const auto* p = static_cast<const std::uint8_t*>(t.raw());
  return {p, p + t.numel() * static_cast<std::int64_t>(tensor::dtype_size(t.dtype()))};
}

// Ten AdamW iterations of one model on a fixed batch (bf16: BF16_Optimizer with clipping; fp16:
// FP16_Optimizer with a dynamic loss scale that overflows at first).
TrainingOutcome train_run(DType activations, Precision precision = Precision::kBf16,
                          Wiring wiring = Wiring::kWithComputeCopy) {
  const model::ModelOptions o = tiny_options(activations);
  const model::ParamTable table = model::ParamTable::build(o.config);
  model::ParamBuffer initial(table, DType::kFloat32);
  model::initialize_parameters(initial, 1234);
  OptimizerOptions options;
  options.precision = precision;
  options.communication_dtype = precision == Precision::kBf16 ? DType::kBFloat16 : DType::kFloat16;
  options.gradient_clipping = 1.0;
  options.adam.weight_decay = 0.1;
  if (precision == Precision::kFp16) {
    DynamicLossScaleArgs scaling;
    scaling.init_scale = std::ldexp(1.0, 20);
    scaling.scale_window = 2;
    options.loss_scaler = LossScaler::dynamic(LossScaleRule::kDynamicFp16Opt, scaling);
  }
  options.fp32_compute_copy = wiring == Wiring::kWithComputeCopy;
  MixedPrecisionOptimizer optimizer(table, options);
  constexpr double kLr = 3e-3;
  optimizer.initialize(initial.flat(), kLr);
  model::GptModel model(o, table);

  const std::int64_t n = o.micro_batch_size * o.config.seq_length;
  std::vector<std::int64_t> tokens, labels, positions;
  std::vector<float> mask;
  std::mt19937 gen(5);
  std::uniform_int_distribution<std::int64_t> id(0, 15);  // a small vocabulary it can learn
  for (std::int64_t i = 0; i < n; ++i) {
    tokens.push_back(id(gen));
    labels.push_back((tokens.back() * 3 + 1) % 16);
    positions.push_back(i % o.config.seq_length);
    mask.push_back(1.0f);
  }
  const Shape shape{o.micro_batch_size, o.config.seq_length};
  const model::MicroBatch batch{
      Tensor(tokens.data(), DType::kInt64, shape), Tensor(labels.data(), DType::kInt64, shape),
      Tensor(mask.data(), DType::kFloat32, shape), Tensor(positions.data(), DType::kInt64, shape)};
  const model::ModelParams params =
      activations == DType::kFloat32 ? model::ModelParams(optimizer.compute())
      : wiring == Wiring::kWithComputeCopy
          ? model::ModelParams(optimizer.compute(), optimizer.weights())
          : model::ModelParams(optimizer.weights());
  TrainingOutcome run;
  for (std::int64_t it = 0; it < 10; ++it) {
    const model::DropoutContext dropout{77, static_cast<std::uint64_t>(it), 0, true};
    run.losses.push_back(model.forward_backward(params, optimizer.micro_grads(), batch, dropout,
                                                static_cast<float>(optimizer.loss_scale())));
    optimizer.accumulate_micro_batch();
    run.skipped += optimizer.step(kLr, it + 1).skipped ? 1 : 0;
  }
  run.weights = bytes_of(optimizer.weights().flat());
  run.master = bytes_of(optimizer.master());
  std::vector<ops::SquaresSegment> segments;
  for (const model::ParamSpec& param : table.params())
    segments.push_back({param.offset, param.local_numel()});
  // The trainer's parameter norm reads weights() (16-bit, widened in the sum) either way.
  run.weight_squares = ops::sums_of_squares({}, optimizer.weights().flat(), segments);
  if (wiring == Wiring::kWithComputeCopy) {
    EXPECT_EQ(run.weight_squares, ops::sums_of_squares({}, optimizer.compute().flat(), segments));
  }
  return run;
}

std::vector<double> train_losses(DType activations) {
  return train_run(activations).losses;
}

// The same arithmetic up to the rounding of the activations (bf16: 2^-9 relative per op); Adam's
// normalized steps carry the differences forward. Measured: at most 1.9e-4 relative over the ten
// steps, while the loss falls from 4.88 to 3.62; the bound is ten times the measured worst.
TEST(Bf16ActivationsTraining, FollowsTheFp32ComputeRunAndLearns) {
  const std::vector<double> fp32 = train_losses(DType::kFloat32);
  const std::vector<double> bf16 = train_losses(DType::kBFloat16);
  ASSERT_EQ(bf16.size(), fp32.size());
  for (std::size_t it = 0; it < fp32.size(); ++it) {
    ASSERT_TRUE(std::isfinite(bf16[it])) << "iteration " << it;
    EXPECT_NEAR(bf16[it], fp32[it], 2e-3 * fp32[it]) << "iteration " << it;
  }
  EXPECT_LT(bf16.back(), 0.9 * bf16.front());
  EXPECT_EQ(bf16, train_losses(DType::kBFloat16));  // deterministic
}

// Without the compute copy (the trainer's wiring for 16-bit activations) every loss, the final
// 16-bit weights, the fp32 masters and the weights' sums of squares (the logged parameter norm,
// taken from the 16-bit weights, equal to those of the compute copy) are bit for bit those of
// the run that reads the non-GEMM parameters from the compute copy.
TEST(SixteenBitActivationsTraining, WeightsAloneGiveTheComputeCopyRunBits) {
  for (const Precision precision : {Precision::kBf16, Precision::kFp16}) {
    const DType dtype = precision == Precision::kBf16 ? DType::kBFloat16 : DType::kFloat16;
    SCOPED_TRACE(tensor::dtype_name(dtype));
    const TrainingOutcome with_copy = train_run(dtype, precision, Wiring::kWithComputeCopy);
    const TrainingOutcome alone = train_run(dtype, precision, Wiring::kWeightsAlone);
    for (const double loss : alone.losses) ASSERT_TRUE(std::isfinite(loss));
    EXPECT_EQ(alone.losses, with_copy.losses);
    EXPECT_EQ(alone.weights, with_copy.weights);
    EXPECT_EQ(alone.master, with_copy.master);
    EXPECT_EQ(alone.weight_squares, with_copy.weight_squares);
    EXPECT_EQ(alone.skipped, with_copy.skipped);
    EXPECT_LT(alone.skipped, 9);  // it trained
    if (precision == Precision::kFp16) {
      EXPECT_GT(alone.skipped, 0);  // and skipped steps
    }
  }
}

// The trainer keeps the compute copy only where its model computes in fp32: a --bf16 run on the
// host by default (kAuto), not with 16-bit activations (kParams, as kAuto on a device). Without
// it, initialization rounds the same initial values into the same 16-bit weights.
TEST(TrainerActivationDtype, KeepsTheComputeCopyOnlyForFp32Activations) {
  const auto trainer_options = [](ActivationPrecision activations) {
    TrainerOptions o;
    o.model = tiny_options(DType::kFloat32);
    o.activations = activations;
    o.optimizer.precision = Precision::kBf16;
    o.optimizer.communication_dtype = DType::kBFloat16;
    o.lr_schedule.max_lr = 1e-3;
    o.lr_schedule.decay_steps = 100;
    o.global_batch_size = 2;
    o.train_iters = 1;
    return o;
  };
  const model::ParamTable table = model::ParamTable::build(tiny_options(DType::kFloat32).config);
  const auto has_compute = [](const MixedPrecisionOptimizer& optimizer) {
    for (const BufferBytes& buffer : optimizer.memory()) {
      if (buffer.name == "compute") return true;
    }
    return false;
  };
  Trainer fp32_compute(trainer_options(ActivationPrecision::kAuto), table, {}, {});
  Trainer sixteen(trainer_options(ActivationPrecision::kParams), table, {}, {});
  EXPECT_TRUE(fp32_compute.optimizer().options().fp32_compute_copy);
  EXPECT_TRUE(has_compute(fp32_compute.optimizer()));
  EXPECT_FALSE(sixteen.optimizer().options().fp32_compute_copy);
  EXPECT_FALSE(has_compute(sixteen.optimizer()));
  EXPECT_THROW(sixteen.optimizer().compute(), base::Error);
  fp32_compute.initialize_parameters();
  sixteen.initialize_parameters();
  EXPECT_EQ(bytes_of(sixteen.optimizer().weights().flat()),
            bytes_of(fp32_compute.optimizer().weights().flat()));
  EXPECT_EQ(bytes_of(sixteen.optimizer().master()), bytes_of(fp32_compute.optimizer().master()));
  // The micro-batch gradient buffer lent to the initial values is zero again.
  const auto grads = sixteen.optimizer().micro_grads().flat().host_span<float>();
  EXPECT_EQ(std::count(grads.begin(), grads.end(), 0.0f),
            static_cast<std::ptrdiff_t>(grads.size()));
}

}  // namespace
}  // namespace mds::train
