#include "train/mixed_precision_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "config/deepspeed_config.h"
#include "model/gpt_config.h"
#include "model/param_buffer.h"
#include "model/param_table.h"

namespace mds::train {
namespace {

using model::DecayGroup;
using model::ParamBuffer;
using model::ParamTable;
using tensor::DType;

// L=1, h=8: decay groups {word, position, qkv.weight} and {dense, h_to_4h, 4h_to_h weights};
// LayerNorms and biases are not decayed.
const ParamTable& tiny_table() {
  static const ParamTable table = [] {
    model::GptConfig c;
    c.num_layers = 1;
    c.hidden_size = 8;
    c.num_attention_heads = 2;
    c.seq_length = 4;
    c.max_position_embeddings = 4;
    c.padded_vocab_size = 64;
    return ParamTable::build(c);
  }();
  return table;
}

std::size_t word() {
  return tiny_table().index_of(1, "word_embeddings.weight");
}
std::size_t dense_4h_to_h() {
  return tiny_table().index_of(3, "mlp.dense_4h_to_h.weight");
}
std::size_t ln_weight() {
  return tiny_table().index_of(3, "input_layernorm.weight");
}
std::size_t dense_bias() {
  return tiny_table().index_of(3, "self_attention.dense.bias");
}

AdamHyperParams adam() {
  AdamHyperParams a;
  a.weight_decay = 0.1;
  return a;
}

OptimizerOptions options(Precision precision, int stage = 0, double clip = 0.0) {
  OptimizerOptions o;
  o.precision = precision;
  o.zero_stage = stage;
  o.gradient_clipping = clip;
  o.adam = adam();
  if (precision == Precision::kFp16) o.loss_scaler = LossScaler::static_scale(1.0);
  return o;
}

DynamicLossScaleArgs spec_scaler_args() {  // training.md §10 loss-scaler vectors
  DynamicLossScaleArgs args;
  args.init_scale = 4096;
  args.scale_window = 4;
  args.delayed_shift = 2;
  return args;
}

// Deterministic values per parameter element; padding stays zero.
void fill_pattern(const ParamBuffer& buffer, double amplitude, int seed) {
  const ParamTable& table = buffer.table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    float* v = buffer.view(i).data<float>();
    for (std::int64_t k = 0; k < table[i].local_numel(); ++k) {
      v[k] = static_cast<float>(amplitude *
                                std::sin(0.37 * static_cast<double>(k) + 1.3 * i + 0.71 * seed));
    }
  }
}

float value(const ParamBuffer& buffer, std::size_t index, std::int64_t k) {
  const tensor::Tensor v = buffer.view(index);
  switch (v.dtype()) {
    case DType::kBFloat16:
      return tensor::to_float(v.data<tensor::BFloat16>()[k]);
    case DType::kFloat16:
      return tensor::to_float(v.data<tensor::Float16>()[k]);
    default:
      return v.data<float>()[k];
  }
}

// A copy of one of the optimizer's fp32 states in table layout: partitioned states (bf16, ZeRO;
// one rank here) are scattered back out of their partitions.
ParamBuffer table_layout(const MixedPrecisionOptimizer& opt, tensor::Tensor state) {
  ParamBuffer out(tiny_table(), state.dtype());
  if (state.numel() == tiny_table().buffer_numel()) {
    std::memcpy(out.flat().raw(), state.raw(), state.bytes());
    return out;
  }
  const ZeroShard& shard = opt.shard();
  for (std::size_t g = 0; g < shard.layout().size(); ++g) {
    scatter_partition(shard.group_slice(state, g), shard.layout(), g, 0, out.flat());
  }
  return out;
}
ParamBuffer master_of(const MixedPrecisionOptimizer& opt) {
  return table_layout(opt, opt.master());
}
ParamBuffer exp_avg_of(const MixedPrecisionOptimizer& opt) {
  return table_layout(opt, opt.exp_avg());
}
ParamBuffer exp_avg_sq_of(const MixedPrecisionOptimizer& opt) {
  return table_layout(opt, opt.exp_avg_sq());
}
ParamBuffer accumulator_of(const MixedPrecisionOptimizer& opt) {
  return table_layout(opt, opt.grad_accumulator());
}

void set_grad(const MixedPrecisionOptimizer& opt, std::size_t index, std::int64_t k, float g) {
  opt.micro_grads().view(index).data<float>()[k] = g;
}

std::vector<std::byte> bytes_of(const tensor::Tensor& flat) {
  std::vector<std::byte> out(flat.bytes());
  std::memcpy(out.data(), flat.raw(), out.size());
  return out;
}
std::vector<std::byte> bytes_of(const ParamBuffer& buffer) {
  return bytes_of(buffer.flat());
}

void load_bytes(const tensor::Tensor& flat, const std::vector<std::byte>& bytes) {
  ASSERT_EQ(flat.bytes(), bytes.size());
  std::memcpy(flat.raw(), bytes.data(), bytes.size());
}

void initialize(MixedPrecisionOptimizer& opt, double lr0) {
  ParamBuffer init(tiny_table(), DType::kFloat32);
  fill_pattern(init, 0.05, 0);
  opt.initialize(init.flat(), lr0);
}

// The float ops of apex's kernel for an element whose moments are zero before the step.
float adam_first_moment(float g) {
  const float b1 = 0.9f;
  return b1 * 0.0f + (1 - b1) * g;
}

// Adam from zero moments at `step`, in double (training.md §5.4).
double adam_reference(double p, double g, double lr, double wd, int step) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const double m = (1 - b1) * g, v = (1 - b2) * g * g;
  const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
  return p - lr * ((m / bc1) / (std::sqrt(v / bc2) + eps) + wd * p);
}

TEST(MixedPrecisionOptimizer, Bf16DummyStepThenFirstUpdateUsesStepTwo) {
  MixedPrecisionOptimizer opt(tiny_table(), options(Precision::kBf16));
  const double lr0 = 1e-3, lr = 1e-2, wd = 0.1;
  initialize(opt, lr0);
  EXPECT_EQ(opt.adam_step(), 1);
  for (std::int64_t k = 0; k < 4; ++k) {
    const float p16 = value(opt.params(), word(), k);
    // The construction step decays the decay groups' masters only: p − lr₀·(wd·p) in fp32.
    EXPECT_EQ(value(master_of(opt), word(), k),
              p16 - static_cast<float>(lr0) * (static_cast<float>(wd) * p16));
    EXPECT_NEAR(value(master_of(opt), word(), k), p16 * (1 - lr0 * wd), 1e-8);
    EXPECT_EQ(value(opt.compute(), word(), k), p16);  // 16-bit weights are not refreshed yet
    EXPECT_EQ(value(master_of(opt), ln_weight(), k), value(opt.params(), ln_weight(), k));
    EXPECT_EQ(value(exp_avg_of(opt), word(), k), 0.0f);
  }

  const std::vector<float> grads = {0.5f, -0.25f, 0.75f, 1.5f};  // exact in bf16
  std::vector<float> before(4), before_ln(4);
  for (std::int64_t k = 0; k < 4; ++k) {
    set_grad(opt, word(), k, grads[static_cast<std::size_t>(k)]);
    before[static_cast<std::size_t>(k)] = value(master_of(opt), word(), k);
    before_ln[static_cast<std::size_t>(k)] = value(master_of(opt), ln_weight(), k);
  }
  set_grad(opt, ln_weight(), 0, 0.5f);
  opt.accumulate_micro_batch();
  const StepResult result = opt.step(lr, 1);
  EXPECT_FALSE(result.skipped);
  EXPECT_EQ(result.adam_step, 2);
  ASSERT_TRUE(result.grad_norm.has_value());
  EXPECT_DOUBLE_EQ(*result.grad_norm, std::sqrt(0.25 + 0.0625 + 0.5625 + 2.25 + 0.25));
  for (std::int64_t k = 0; k < 4; ++k) {
    const auto i = static_cast<std::size_t>(k);
    const double expected = adam_reference(before[i], grads[i], lr, wd, 2);
    EXPECT_NEAR(value(master_of(opt), word(), k), expected, 1e-8) << k;
    // With step 1 the update would be sign(g)·lr = 1e-2 away instead of 0.744·lr.
    EXPECT_GT(std::fabs(adam_reference(before[i], grads[i], lr, wd, 1) - expected), 2e-3);
    // Relative: the kernel's (1 − β) is computed in fp32 from β = 0.9f, 0.999f.
    EXPECT_NEAR(value(exp_avg_of(opt), word(), k), 0.1 * grads[i], 1e-6 * std::fabs(grads[i]));
    EXPECT_NEAR(value(exp_avg_sq_of(opt), word(), k), 0.001 * grads[i] * grads[i],
                2e-5 * 0.001 * grads[i] * grads[i]);
    const float rounded = tensor::to_float(tensor::to_bfloat16(value(master_of(opt), word(), k)));
    EXPECT_EQ(value(opt.params(), word(), k), rounded);
    EXPECT_EQ(value(opt.compute(), word(), k), rounded);
  }
  // No-decay group: wd = 0 even with a gradient; without one the master does not move.
  EXPECT_NEAR(value(master_of(opt), ln_weight(), 0), adam_reference(before_ln[0], 0.5, lr, 0.0, 2),
              1e-7);
  EXPECT_EQ(value(master_of(opt), ln_weight(), 1), before_ln[1]);
}

TEST(MixedPrecisionOptimizer, Fp32TakesNoDummyStepAndReportsNoNorm) {
  MixedPrecisionOptimizer opt(tiny_table(), options(Precision::kFp32));
  initialize(opt, 1e-3);
  EXPECT_EQ(opt.adam_step(), 0);
  EXPECT_EQ(opt.params().flat().raw(), opt.compute().flat().raw());
  EXPECT_EQ(opt.params().flat().raw(), opt.master().raw());
  const float p = value(opt.params(), word(), 0);
  set_grad(opt, word(), 0, 0.5f);
  opt.accumulate_micro_batch();
  const StepResult result = opt.step(1e-2, 1);
  EXPECT_EQ(result.adam_step, 1);
  EXPECT_FALSE(result.grad_norm.has_value());
  EXPECT_NEAR(value(opt.params(), word(), 0), adam_reference(p, 0.5, 1e-2, 0.1, 1), 1e-8);
}

// Without the compute copy a 16-bit optimizer has no compute() (one line) and the same weights;
// fp32's compute() is its weights either way.
TEST(MixedPrecisionOptimizer, ComputeCopyOnlyWhenAsked) {
  for (const Precision precision : {Precision::kBf16, Precision::kFp16}) {
    OptimizerOptions without = options(precision);
    without.fp32_compute_copy = false;
    MixedPrecisionOptimizer a(tiny_table(), options(precision)), b(tiny_table(), without);
    initialize(a, 1e-3);
    initialize(b, 1e-3);
    EXPECT_EQ(bytes_of(b.weights()), bytes_of(a.weights()));
    EXPECT_EQ(bytes_of(b.master()), bytes_of(a.master()));
    try {
      (void)b.compute();
      ADD_FAILURE() << "compute() without a compute copy";
    } catch (const base::Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "optimizer: this " + std::string(to_string(precision)) +
                    " optimizer keeps no fp32 compute copy (fp32_compute_copy is off: its model "
                    "computes with 16-bit activations from weights())");
    }
  }
  OptimizerOptions fp32 = options(Precision::kFp32);
  fp32.fp32_compute_copy = false;
  MixedPrecisionOptimizer opt(tiny_table(), fp32);
  EXPECT_EQ(opt.compute().flat().raw(), opt.weights().flat().raw());
}

TEST(MixedPrecisionOptimizer, WeightDecayOnlyOnDecayGroups) {
  MixedPrecisionOptimizer opt(tiny_table(), options(Precision::kFp32));
  initialize(opt, 0.0);
  const ParamTable& table = tiny_table();
  const std::vector<std::byte> before = bytes_of(opt.params());
  std::vector<float> initial(static_cast<std::size_t>(table.buffer_numel()));
  std::memcpy(initial.data(), before.data(), before.size());
  set_grad(opt, word(), 0, 1.0f);  // one gradient so that the step is not degenerate
  opt.accumulate_micro_batch();
  const float lr = 0.5f, wd = 0.1f;
  opt.step(lr, 1);
  const float* after = opt.params().flat().data<float>();
  std::int64_t decayed = 0, kept = 0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    for (std::int64_t k = 0; k < table[i].local_numel(); ++k) {
      if (i == word() && k == 0) continue;
      const std::int64_t at = table[i].offset + k;
      const float p = initial[static_cast<std::size_t>(at)];
      if (table[i].group == DecayGroup::kNoDecay) {
        EXPECT_EQ(after[at], p) << table[i].name;
        ++kept;
      } else {
        // Zero moments: update = 0/(0+eps) + wd·p.
        EXPECT_EQ(after[at], p - lr * (wd * p)) << table[i].name << " " << k;
        ++decayed;
      }
    }
  }
  EXPECT_GT(decayed, 0);
  EXPECT_GT(kept, 0);
  for (std::int64_t at = table.group_begin(DecayGroup::kDecayFirstHalf); at < table.buffer_numel();
       ++at) {
    bool inside = false;
    for (const model::ParamSpec& spec : table.params())
      inside = inside || (at >= spec.offset && at < spec.offset + spec.local_numel());
    if (!inside) {
      EXPECT_EQ(after[at], 0.0f) << "padding " << at;
    }
  }
}

// Gradients 6 and 8 (norm 10) at two elements of different groups, times `scale`.
void put_norm_ten(MixedPrecisionOptimizer& opt, float scale) {
  set_grad(opt, word(), 3, 6.0f * scale);
  set_grad(opt, dense_4h_to_h(), 5, 8.0f * scale);
  opt.accumulate_micro_batch();
}

TEST(MixedPrecisionOptimizer, Bf16ClipsOnlyAboveTheThreshold) {
  for (const double clip : {1.0, 100.0}) {
    MixedPrecisionOptimizer opt(tiny_table(), options(Precision::kBf16, 0, clip));
    initialize(opt, 0.0);
    put_norm_ten(opt, 1.0f);
    const StepResult result = opt.step(1e-3, 1);
    EXPECT_DOUBLE_EQ(*result.grad_norm, 10.0);  // pre-clip
    EXPECT_EQ(result.clipped, clip < 10.0);
    const float factor = clip < 10.0 ? static_cast<float>(clip / (10.0 + 1e-6)) : 1.0f;
    EXPECT_EQ(value(exp_avg_of(opt), word(), 3), adam_first_moment(6.0f * factor));
    EXPECT_EQ(value(exp_avg_of(opt), dense_4h_to_h(), 5), adam_first_moment(8.0f * factor));
    EXPECT_NEAR(value(exp_avg_of(opt), word(), 3), clip < 10.0 ? 0.06 : 0.6, 1e-6);
  }
}

TEST(MixedPrecisionOptimizer, Fp16CombinedUnscaleAndClip) {
  for (const int stage : {0, 1}) {
    for (const double clip : {1.0, 100.0}) {
      OptimizerOptions o = options(Precision::kFp16, stage, clip);
      o.loss_scaler = LossScaler::static_scale(1024.0);
      MixedPrecisionOptimizer opt(tiny_table(), o);
      initialize(opt, 0.0);
      EXPECT_EQ(opt.loss_scale(), 1024.0);
      put_norm_ten(opt, 1024.0f);
      const StepResult result = opt.step(1e-3, 1);
      EXPECT_FALSE(result.skipped);
      EXPECT_DOUBLE_EQ(*result.grad_norm, 10.0);  // unscaled, pre-clip
      EXPECT_EQ(result.clipped, clip < 10.0);
      const double combined = clip < 10.0 ? 1024.0 * ((10.0 + 1e-6) / clip) : 1024.0;
      const float inverse = static_cast<float>(1.0 / combined);
      EXPECT_EQ(value(exp_avg_of(opt), word(), 3), adam_first_moment(6144.0f * inverse));
      EXPECT_NEAR(value(exp_avg_of(opt), dense_4h_to_h(), 5), clip < 10.0 ? 0.08 : 0.8, 1e-6);
    }
  }
}

// Both wrappers update the scale before unscaling: a step that doubles the scale divides its
// gradients by the doubled scale. ZeRO reports norm / previous scale, FP16_Optimizer / new scale.
TEST(MixedPrecisionOptimizer, Fp16UnscalesWithTheUpdatedScale) {
  for (const int stage : {0, 1}) {
    DynamicLossScaleArgs args;
    args.init_scale = 1024;
    args.scale_window = 1;
    OptimizerOptions o = options(Precision::kFp16, stage);
    o.loss_scaler = LossScaler::dynamic(
        stage == 0 ? LossScaleRule::kDynamicFp16Opt : LossScaleRule::kDynamicZero, args);
    MixedPrecisionOptimizer opt(tiny_table(), o);
    initialize(opt, 0.0);
    if (stage == 0) {  // FP16_Optimizer first doubles on its second clean step
      put_norm_ten(opt, 1024.0f);
      EXPECT_EQ(opt.step(1e-3, 1).loss_scale, 1024.0);
      ASSERT_EQ(opt.loss_scale(), 1024.0);
    }
    const float m_before = value(exp_avg_of(opt), word(), 3);
    put_norm_ten(opt, 1024.0f);
    const StepResult result = opt.step(1e-3, 2);
    EXPECT_EQ(result.loss_scale, 2048.0) << stage;
    EXPECT_DOUBLE_EQ(*result.grad_norm, stage == 1 ? 10.0 : 5.0);
    EXPECT_EQ(value(exp_avg_of(opt), word(), 3), 0.9f * m_before + (1 - 0.9f) * 3.0f) << stage;
  }
}

std::vector<bool> spec_overflows() {
  return {true, true, false, false, false, false, true, false, true, true, false, false, false};
}

std::vector<double> run_overflow_sequence(int stage, LossScaleRule rule) {
  OptimizerOptions o = options(Precision::kFp16, stage);
  o.loss_scaler = LossScaler::dynamic(rule, spec_scaler_args());
  MixedPrecisionOptimizer opt(tiny_table(), o);
  initialize(opt, 0.0);
  std::vector<double> scales;
  std::int64_t expected_step = 1;
  double last_norm = 0.0;
  for (const bool overflow : spec_overflows()) {
    const float scale = static_cast<float>(opt.loss_scale());
    fill_pattern(opt.micro_grads(), 1e-3 * scale, static_cast<int>(scales.size()));
    if (overflow) set_grad(opt, dense_bias(), 2, 1e30f);  // inf once rounded to fp16
    const std::vector<std::byte> params = bytes_of(opt.params()), master = bytes_of(master_of(opt)),
                                 m = bytes_of(exp_avg_of(opt)), v = bytes_of(exp_avg_sq_of(opt));
    opt.accumulate_micro_batch();
    const StepResult result = opt.step(1e-3, static_cast<std::int64_t>(scales.size()));
    EXPECT_EQ(result.skipped, overflow);
    if (overflow) {
      EXPECT_EQ(bytes_of(opt.params()), params);
      EXPECT_EQ(bytes_of(master_of(opt)), master);
      EXPECT_EQ(bytes_of(exp_avg_of(opt)), m);
      EXPECT_EQ(bytes_of(exp_avg_sq_of(opt)), v);
      EXPECT_EQ(*result.grad_norm, last_norm);  // the previous step's norm
    } else {
      ++expected_step;
      EXPECT_NE(bytes_of(master_of(opt)), master);
      last_norm = *result.grad_norm;
      EXPECT_GT(last_norm, 0.0);
    }
    EXPECT_EQ(result.adam_step, expected_step);
    EXPECT_EQ(opt.adam_step(), expected_step);
    EXPECT_EQ(result.loss_scale, opt.loss_scale());
    scales.push_back(result.loss_scale);
  }
  // Dropped or consumed: a zero micro-batch gradient starts the next step's accumulator alone.
  opt.accumulate_micro_batch();
  const std::vector<std::byte> acc = bytes_of(accumulator_of(opt));
  EXPECT_EQ(acc, std::vector<std::byte>(acc.size()));
  return scales;
}

TEST(MixedPrecisionOptimizer, Fp16OverflowSkipsAndFollowsScalerVectors) {
  EXPECT_EQ(run_overflow_sequence(1, LossScaleRule::kDynamicZero),
            (std::vector<double>{4096, 2048, 2048, 2048, 2048, 4096, 4096, 4096, 2048, 1024, 1024,
                                 1024, 1024}));
  EXPECT_EQ(
      run_overflow_sequence(0, LossScaleRule::kDynamicFp16Opt),
      (std::vector<double>{2048, 1024, 1024, 1024, 1024, 1024, 512, 512, 256, 128, 128, 128, 128}));
}

TEST(MixedPrecisionOptimizer, Bf16RoundsEachMicroBatchThenAddsInFp32) {
  OptimizerOptions o = options(Precision::kBf16);
  o.communication_dtype = DType::kFloat32;
  MixedPrecisionOptimizer opt(tiny_table(), o);
  initialize(opt, 0.0);
  const float g = 1.0f + 3.0f / 512.0f;  // bf16 rounds it up to 1 + 2^-7
  for (int micro = 0; micro < 2; ++micro) {
    set_grad(opt, word(), 0, g);
    opt.accumulate_micro_batch();
    EXPECT_EQ(value(opt.micro_grads(), word(), 0), 0.0f);
  }
  EXPECT_EQ(value(accumulator_of(opt), word(), 0), 2.015625f);
  EXPECT_NE(g + g, 2.015625f);  // 2.01171875 in fp32
}

TEST(MixedPrecisionOptimizer, Bf16CommunicationDtypeRoundsTheAccumulatedGradient) {
  for (const DType comm : {DType::kBFloat16, DType::kFloat32}) {
    OptimizerOptions o = options(Precision::kBf16);
    o.communication_dtype = comm;
    MixedPrecisionOptimizer opt(tiny_table(), o);
    initialize(opt, 0.0);
    set_grad(opt, word(), 0, 1.0f);
    opt.accumulate_micro_batch();
    set_grad(opt, word(), 0, 1.0f / 256.0f);
    opt.accumulate_micro_batch();
    EXPECT_EQ(value(accumulator_of(opt), word(), 0), 1.0f + 1.0f / 256.0f);
    opt.step(1e-3, 1);
    // bf16 rounds 1 + 2^-8 to even, i.e. 1.
    const float reduced = comm == DType::kBFloat16 ? 1.0f : 1.0f + 1.0f / 256.0f;
    EXPECT_EQ(value(exp_avg_of(opt), word(), 0), adam_first_moment(reduced));
  }
}

TEST(MixedPrecisionOptimizer, Fp16AccumulatesInFp16) {
  MixedPrecisionOptimizer opt(tiny_table(), options(Precision::kFp16));
  initialize(opt, 0.0);
  set_grad(opt, word(), 0, 1.0f);
  opt.accumulate_micro_batch();
  for (int micro = 0; micro < 3; ++micro) {
    set_grad(opt, word(), 0, 1.0f / 2048.0f);  // half an fp16 ulp of 1: ties to even each time
    opt.accumulate_micro_batch();
  }
  EXPECT_EQ(accumulator_of(opt).dtype(), DType::kFloat16);
  EXPECT_EQ(accumulator_of(opt).view(word()).data<tensor::Float16>()[0].bits, 0x3C00);  // 1.0
  // An fp32 accumulator would hold 1 + 3·2^-11, i.e. 1 + 2^-9 in fp16.
  EXPECT_EQ(tensor::to_float16(1.0f + 3.0f / 2048.0f).bits, 0x3C02);
}

TEST(MixedPrecisionOptimizer, Bf16NonFiniteNormIsAnError) {
  MixedPrecisionOptimizer opt(tiny_table(), options(Precision::kBf16));
  initialize(opt, 0.0);
  set_grad(opt, word(), 0, std::numeric_limits<float>::quiet_NaN());
  opt.accumulate_micro_batch();
  try {
    opt.step(1e-3, 7);
    FAIL() << "no error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient norm is NaN/inf at iteration 7"),
              std::string::npos)
        << e.what();
  }
}

struct Snapshot {
  std::vector<std::byte> params, master, exp_avg, exp_avg_sq;
  std::int64_t step = 0;
  LossScalerState scaler;
  double norm = 0.0;
};

Snapshot save(const MixedPrecisionOptimizer& opt) {
  return {bytes_of(opt.params()),     bytes_of(opt.master()), bytes_of(opt.exp_avg()),
          bytes_of(opt.exp_avg_sq()), opt.adam_step(),        opt.loss_scaler().state(),
          opt.last_grad_norm()};
}

void restore(MixedPrecisionOptimizer& opt, const Snapshot& s) {
  load_bytes(opt.params().flat(), s.params);
  load_bytes(opt.master(), s.master);
  load_bytes(opt.exp_avg(), s.exp_avg);
  load_bytes(opt.exp_avg_sq(), s.exp_avg_sq);
  opt.set_adam_step(s.step);
  opt.load_loss_scaler_state(s.scaler);
  opt.set_last_grad_norm(s.norm);
  opt.restore_from_checkpoint(RestoreSource::kAsLoaded);
}

// Iteration `it`: two micro-batches, an overflow at iteration 6 for fp16, an LR per iteration.
StepResult train_iteration(MixedPrecisionOptimizer& opt, int it) {
  const bool fp16 = opt.options().precision == Precision::kFp16;
  for (int micro = 0; micro < 2; ++micro) {
    fill_pattern(opt.micro_grads(), 0.01 * opt.loss_scale(), 10 * it + micro);
    if (fp16 && it == 6 && micro == 1) set_grad(opt, word(), 1, 1e30f);
    opt.accumulate_micro_batch();
  }
  return opt.step(1e-3 * (1.0 + 0.1 * it), it);
}

// Every wrapper and stage, with a dynamic fp16 scaler that moves within train_iteration's 8 steps.
std::vector<OptimizerOptions> every_optimizer() {
  std::vector<OptimizerOptions> all = {
      options(Precision::kFp32, 0, 0.05), options(Precision::kFp32, 1, 0.05),
      options(Precision::kFp32, 2, 0.05), options(Precision::kBf16, 0, 0.05)};
  for (const int stage : {0, 1, 2}) {
    OptimizerOptions o = options(Precision::kFp16, stage, 0.05);
    DynamicLossScaleArgs args = spec_scaler_args();
    args.scale_window = 2;
    o.loss_scaler = LossScaler::dynamic(
        stage == 0 ? LossScaleRule::kDynamicFp16Opt : LossScaleRule::kDynamicZero, args);
    all.push_back(o);
  }
  // The 16-bit optimizers of a model with 16-bit activations: no compute copy.
  for (std::size_t k = 0, count = all.size(); k < count; ++k) {
    if (all[k].precision == Precision::kFp32) continue;
    all.push_back(all[k]);
    all.back().fp32_compute_copy = false;
  }
  return all;
}

std::string name_of(const OptimizerOptions& o) {
  return std::string(to_string(o.precision)) + " stage " + std::to_string(o.zero_stage) +
         (o.fp32_compute_copy ? "" : " without compute copy");
}

// train_iteration's eight steps on a reference optimizer and on `other` side by side: each
// micro-batch's gradient is written into both (`before_write` prepares other's buffer first), then
// `accumulate` folds other's in; the steps' results and the final state must be the same bits.
void expect_same_training(MixedPrecisionOptimizer& reference, MixedPrecisionOptimizer& other,
                          const std::string& name,
                          const std::function<void(const MixedPrecisionOptimizer&)>& before_write,
                          const std::function<void(MixedPrecisionOptimizer&, int)>& accumulate) {
  initialize(reference, 1e-4);
  initialize(other, 1e-4);
  const bool fp16 = reference.options().precision == Precision::kFp16;
  for (int it = 1; it <= 8; ++it) {
    for (int micro = 0; micro < 2; ++micro) {
      before_write(other);
      for (const MixedPrecisionOptimizer* opt : {&reference, &other}) {
        fill_pattern(opt->micro_grads(), 0.01 * opt->loss_scale(), 10 * it + micro);
        if (fp16 && it == 6 && micro == 1) set_grad(*opt, word(), 1, 1e30f);
      }
      reference.accumulate_micro_batch();
      accumulate(other, micro);
    }
    const double lr = 1e-3 * (1.0 + 0.1 * it);
    const StepResult want = reference.step(lr, it);
    const StepResult got = other.step(lr, it);
    EXPECT_EQ(got.skipped, want.skipped) << name << " it " << it;
    EXPECT_EQ(got.grad_norm, want.grad_norm) << name << " it " << it;
    EXPECT_EQ(got.clipped, want.clipped) << name << " it " << it;
  }
  EXPECT_EQ(bytes_of(other.params()), bytes_of(reference.params())) << name;
  EXPECT_EQ(bytes_of(other.master()), bytes_of(reference.master())) << name;
  EXPECT_EQ(bytes_of(other.exp_avg()), bytes_of(reference.exp_avg())) << name;
  EXPECT_EQ(bytes_of(other.exp_avg_sq()), bytes_of(reference.exp_avg_sq())) << name;
}

// With micro_grads_written_whole the optimizer leaves micro_grads as it is between micro-batches
// and after a step; a writer that fills every element each time (the model's padding zeros
// included) over whatever is there, NaNs here, trains as the zeroed buffer does.
TEST(MixedPrecisionOptimizer, MicroGradsWrittenWholeNeedNoZeroing) {
  for (OptimizerOptions o : every_optimizer()) {
    MixedPrecisionOptimizer zeroed(tiny_table(), o);
    o.micro_grads_written_whole = true;
    MixedPrecisionOptimizer written(tiny_table(), o);
    const auto nans_then_zeros = [](const MixedPrecisionOptimizer& opt) {
      const model::ParamBuffer& g = opt.micro_grads();
      for (float& x : g.scratch(g.capacity_numel()).host_span<float>()) x = std::nanf("");
      for (float& x : g.flat().host_span<float>()) x = 0.0f;
    };
    expect_same_training(zeroed, written, name_of(o), nans_then_zeros,
                         [](MixedPrecisionOptimizer& opt, int) { opt.accumulate_micro_batch(); });
  }
}

// accumulate_micro_batch(last = true) before a step: with one rank the communication dtype's
// rounding moves into that pass (bf16 communicating in bf16 here), bit for bit what step() does
// on its own; elsewhere it changes nothing.
TEST(MixedPrecisionOptimizer, LastMicroBatchRoundsAsTheStepWould) {
  std::vector<OptimizerOptions> all = every_optimizer();
  for (const bool copy : {true, false}) {
    OptimizerOptions o = options(Precision::kBf16, 0, 0.05);
    o.communication_dtype = DType::kBFloat16;
    o.fp32_compute_copy = copy;
    all.push_back(o);
  }
  for (const OptimizerOptions& o : all) {
    MixedPrecisionOptimizer plain(tiny_table(), o), told(tiny_table(), o);
    expect_same_training(
        plain, told,
        name_of(o) + " communicating in " + std::string(tensor::dtype_name(o.communication_dtype)),
        [](const MixedPrecisionOptimizer&) {},
        [](MixedPrecisionOptimizer& opt, int micro) { opt.accumulate_micro_batch(micro == 1); });
  }
}

// A step with no micro-batch since the last one steps on zero gradients, as before.
TEST(MixedPrecisionOptimizer, AStepWithoutMicroBatchesSeesZeroGradients) {
  MixedPrecisionOptimizer skipped(tiny_table(), options(Precision::kFp32)),
      zeros(tiny_table(), options(Precision::kFp32));
  initialize(skipped, 1e-4);
  initialize(zeros, 1e-4);
  for (MixedPrecisionOptimizer* opt : {&skipped, &zeros}) {
    fill_pattern(opt->micro_grads(), 0.01, 3);
    opt->accumulate_micro_batch();
    opt->step(1e-3, 1);
  }
  zeros.accumulate_micro_batch();  // zero micro-batch gradients
  skipped.step(1e-3, 2);
  zeros.step(1e-3, 2);
  EXPECT_EQ(bytes_of(skipped.params()), bytes_of(zeros.params()));
}

TEST(MixedPrecisionOptimizer, RestoreMidRunContinuesBitIdentically) {
  for (const OptimizerOptions& o : every_optimizer()) {
    const std::string name = name_of(o);
    MixedPrecisionOptimizer uninterrupted(tiny_table(), o);
    MixedPrecisionOptimizer first(tiny_table(), o);
    initialize(uninterrupted, 1e-4);
    initialize(first, 1e-4);
    std::vector<StepResult> expected;
    bool any_clipped = false;
    for (int it = 1; it <= 8; ++it) {
      expected.push_back(train_iteration(uninterrupted, it));
      any_clipped = any_clipped || expected.back().clipped;
    }
    EXPECT_TRUE(any_clipped) << name;
    for (int it = 1; it <= 4; ++it) train_iteration(first, it);
    const Snapshot snapshot = save(first);

    MixedPrecisionOptimizer resumed(tiny_table(), o);
    initialize(resumed, 1e-4);  // as upstream: build, initialize, then load
    restore(resumed, snapshot);
    for (int it = 5; it <= 8; ++it) {
      const StepResult got = train_iteration(resumed, it);
      const StepResult& want = expected[static_cast<std::size_t>(it - 1)];
      EXPECT_EQ(got.skipped, want.skipped) << name << " it " << it;
      EXPECT_EQ(got.grad_norm, want.grad_norm) << name << " it " << it;
      EXPECT_EQ(got.loss_scale, want.loss_scale) << name << " it " << it;
      EXPECT_EQ(got.adam_step, want.adam_step) << name << " it " << it;
    }
    if (o.precision == Precision::kFp16) {
      EXPECT_TRUE(expected[5].skipped) << name;
    }
    EXPECT_EQ(bytes_of(resumed.params()), bytes_of(uninterrupted.params())) << name;
    EXPECT_EQ(bytes_of(resumed.master()), bytes_of(uninterrupted.master())) << name;
    if (o.fp32_compute_copy) {
      EXPECT_EQ(bytes_of(resumed.compute()), bytes_of(uninterrupted.compute())) << name;
    }
    EXPECT_EQ(bytes_of(resumed.exp_avg()), bytes_of(uninterrupted.exp_avg())) << name;
    EXPECT_EQ(bytes_of(resumed.exp_avg_sq()), bytes_of(uninterrupted.exp_avg_sq())) << name;
    EXPECT_EQ(resumed.loss_scaler().state().cur_scale,
              uninterrupted.loss_scaler().state().cur_scale)
        << name;

    // After a real step params == round(master) wherever master is a separate copy.
    if (o.precision != Precision::kFp32 || o.zero_stage >= 1) {
      MixedPrecisionOptimizer from_master(tiny_table(), o);
      restore(from_master, snapshot);
      from_master.restore_from_checkpoint(RestoreSource::kParamsFromMaster);
      EXPECT_EQ(bytes_of(from_master.params()), snapshot.params) << name;
    }
  }
}

TEST(MixedPrecisionOptimizer, OptionsFromDeepSpeedConfig) {
  const AdamHyperParams a = adam();
  const OptimizerOptions fp16 = optimizer_options_from_config(
      config::parse_deepspeed_config(
          R"({"train_batch_size": 8, "gradient_clipping": 1.0, "zero_optimization": {"stage": 1},
              "fp16": {"enabled": true, "initial_scale_power": 12, "hysteresis": 2}})",
          "ds.json"),
      a);
  EXPECT_EQ(fp16.precision, Precision::kFp16);
  EXPECT_EQ(fp16.zero_stage, 1);
  EXPECT_EQ(fp16.gradient_clipping, 1.0);
  EXPECT_EQ(fp16.communication_dtype, DType::kFloat16);
  EXPECT_EQ(fp16.loss_scaler.rule(), LossScaleRule::kDynamicZero);
  EXPECT_EQ(fp16.loss_scaler.scale(), 4096.0);

  const OptimizerOptions bf16 = optimizer_options_from_config(
      config::parse_deepspeed_config(R"({"train_batch_size": 8, "bf16": {"enabled": true}})",
                                     "ds.json"),
      a);
  EXPECT_EQ(bf16.precision, Precision::kBf16);
  EXPECT_EQ(bf16.communication_dtype, DType::kBFloat16);
  EXPECT_EQ(bf16.loss_scaler.rule(), LossScaleRule::kNone);
  EXPECT_FALSE(bf16.overlap_reduction);  // DeepSpeed's default below stage 3
  EXPECT_TRUE(
      optimizer_options_from_config(
          config::parse_deepspeed_config(
              R"({"train_batch_size": 8, "zero_optimization": {"overlap_comm": true}})", "ds.json"),
          a)
          .overlap_reduction);

  EXPECT_EQ(optimizer_options_from_config(
                config::parse_deepspeed_config(R"({"train_batch_size": 8})", "ds.json"), a)
                .communication_dtype,
            DType::kFloat32);
  EXPECT_THROW(
      optimizer_options_from_config(
          config::parse_deepspeed_config(
              R"({"train_batch_size": 8, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1}})",
              "ds.json"),
          a),
      base::Error);
}

TEST(MixedPrecisionOptimizer, StepBeforeInitializeIsAnError) {
  MixedPrecisionOptimizer opt(tiny_table(), options(Precision::kBf16));
  EXPECT_THROW(opt.step(1e-3, 1), base::Error);
  initialize(opt, 0.0);
  EXPECT_THROW(initialize(opt, 0.0), base::Error);
}

}  // namespace
}  // namespace mds::train
