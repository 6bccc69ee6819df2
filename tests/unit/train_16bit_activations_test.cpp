// The trainer's choice of activation dtype, and the bf16 optimizer driving a model with bf16
// activations on the host as the Trainer drives it (GEMM weights from weights(), the rest from
// compute()).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "model/gpt_model.h"
#include "model/init.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
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

// Ten bf16 AdamW iterations of one model on a fixed batch; the losses.
std::vector<double> train_losses(DType activations) {
  const model::ModelOptions o = tiny_options(activations);
  const model::ParamTable table = model::ParamTable::build(o.config);
  model::ParamBuffer initial(table, DType::kFloat32);
  model::initialize_parameters(initial, 1234);
  OptimizerOptions options;
  options.precision = Precision::kBf16;
  options.communication_dtype = DType::kBFloat16;
  options.gradient_clipping = 1.0;
  options.adam.weight_decay = 0.1;
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
                                     : model::ModelParams(optimizer.compute(), optimizer.weights());
  std::vector<double> losses;
  for (std::int64_t it = 0; it < 10; ++it) {
    const model::DropoutContext dropout{77, static_cast<std::uint64_t>(it), 0, true};
    losses.push_back(model.forward_backward(params, optimizer.micro_grads(), batch, dropout, 1.0f));
    optimizer.accumulate_micro_batch();
    optimizer.step(kLr, it + 1);
  }
  return losses;
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

}  // namespace
}  // namespace mds::train
