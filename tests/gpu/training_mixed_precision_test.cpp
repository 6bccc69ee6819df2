// The bf16 and fp16 training steps on a CUDA device against the same steps on the host: the tiny
// GPT-2 of tiny_gpt_training.h trained 40 iterations from one initialization with 16-bit weights,
// fp32 masters and Adam state (BF16_Optimizer; FP16_Optimizer with its dynamic loss scaler), and
// with ZeRO stages 1 and 2 in one process (fp16 and fp32).
//
// Both sides do the same arithmetic: the model computes in fp32 from the widened 16-bit weights
// (fp32 activations, so the optimizer keeps its fp32 compute copy on the device: the path of
// TrainerOptions::activations = kFp32 there; a --bf16/--fp16 run's default on a device, 16-bit
// activations from the 16-bit weights alone with no compute copy, is model_16bit_test.cpp's),
// each micro-batch gradient is rounded as upstream's 16-bit gradient and accumulated, the norm,
// clipping, overflow check and AdamW follow. Only the model's own rounding differs (the fp32
// test's 1e-5 level: summation orders, the flash attention, the device's transcendentals). The
// 16-bit weights amplify that a little: where a master lands within that distance of a rounding
// boundary the two runs round it one bf16 ulp (2^-8 relative) or fp16 ulp (2^-11) apart, which
// moves the loss by far less than 1e-3 relative for the few elements it hits. Hence the bounds:
// losses within 1e-3 relative (ten times the fp32 test's), final weights within 5e-3
// (‖Δ‖/‖w‖, Adam's normalized steps carrying the differences). These are expected from the
// arithmetic, not observed: this test has never run on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "model/init.h"
#include "ops/elementwise.h"
#include "tests/gpu/tiny_gpt_training.h"
#include "train/loss_scaler.h"

namespace mds {
namespace {

using gpu_test::host_values;
using gpu_test::kCuda0;
using gpu_test::relative_difference;
using gpu_test::tiny_options;
using gpu_test::TrainingRun;
using model::ParamTable;
using tensor::DType;
using tensor::Tensor;

constexpr std::int64_t kIterations = 40;

train::OptimizerOptions bf16_adam() {
  train::OptimizerOptions o = gpu_test::fp32_adam();
  o.precision = train::Precision::kBf16;
  o.communication_dtype = DType::kBFloat16;  // DeepSpeed's default for bf16: rounds once per step
  return o;
}

// FP16_Optimizer's dynamic scaler starting at 2^32: the first steps' scaled fp16 gradients
// overflow (anything above 65504 / 2^32 ≈ 1.5e-5 becomes inf), so steps are skipped while the
// scale halves; a window of 8 lets it grow back and overflow again later in the run. On the host
// this skips 16 of the 40 steps: the first 15 (down to 2^18), then one after the scale regrew
// (ZeRO 1 and 2 likewise, with their own scaler).
train::OptimizerOptions fp16_adam() {
  train::OptimizerOptions o = gpu_test::fp32_adam();
  o.precision = train::Precision::kFp16;
  o.communication_dtype = DType::kFloat16;
  train::DynamicLossScaleArgs args;
  args.init_scale = 4294967296.0;
  args.scale_window = 8;
  o.loss_scaler = train::LossScaler::dynamic(train::LossScaleRule::kDynamicFp16Opt, args);
  return o;
}

// ZeRO stage `stage` with one rank: DeepSpeedZeroOptimizer over whole-group partitions.
train::OptimizerOptions zero(train::OptimizerOptions options, int stage) {
  options.zero_stage = stage;
  if (options.precision == train::Precision::kFp16) {
    train::DynamicLossScaleArgs args;
    args.init_scale = 4294967296.0;
    args.scale_window = 8;
    options.loss_scaler = train::LossScaler::dynamic(train::LossScaleRule::kDynamicZero, args);
  }
  return options;
}

class MixedPrecisionTrainingOnDevice : public ::testing::Test {
 protected:
  MixedPrecisionTrainingOnDevice()
      : table_(ParamTable::build(tiny_options().config)),
        initial_(table_, DType::kFloat32),
        device_(kCuda0) {
    model::initialize_parameters(initial_, 1234);
  }

  // What one run did per iteration.
  struct Trace {
    std::vector<double> losses;
    std::vector<bool> skipped;
    std::vector<double> scales;
    std::int64_t skips() const { return std::count(skipped.begin(), skipped.end(), true); }
  };

  static Trace train(TrainingRun& run) {
    Trace trace;
    for (std::int64_t it = 0; it < kIterations; ++it) {
      trace.losses.push_back(run.iteration(it));
      trace.skipped.push_back(run.last_step.skipped);
      trace.scales.push_back(run.last_step.loss_scale);
    }
    return trace;
  }

  // The device run against the host run with the same options; returns the host's trace.
  Trace expect_device_follows_host(const train::OptimizerOptions& options) {
    TrainingRun cpu(tiny_options(), table_, host_, initial_.flat(), options);
    TrainingRun gpu(tiny_options(), table_, device_, initial_.flat(), options);
    EXPECT_EQ(gpu.optimizer.device(), kCuda0);
    EXPECT_EQ(gpu.optimizer.compute().flat().device(), kCuda0);
    const Trace want = train(cpu), got = train(gpu);
    EXPECT_EQ(got.skipped, want.skipped);
    EXPECT_EQ(got.scales, want.scales);
    double worst = 0.0;
    for (std::int64_t it = 0; it < kIterations; ++it) {
      const auto i = static_cast<std::size_t>(it);
      EXPECT_TRUE(std::isfinite(got.losses[i])) << "iteration " << it;
      const double relative = std::abs(got.losses[i] - want.losses[i]) / std::abs(want.losses[i]);
      worst = std::max(worst, relative);
      EXPECT_LE(relative, 1e-3) << "iteration " << it << ": device " << got.losses[i] << ", host "
                                << want.losses[i];
    }
    std::printf("%s: worst relative loss difference over %lld iterations: %.3g, %lld skipped\n",
                std::string(train::to_string(options.precision)).c_str(),
                static_cast<long long>(kIterations), worst, static_cast<long long>(got.skips()));
    gpu.optimizer.copy_state_to_host();
    // 16-bit host weights widened to fp32.
    const auto fp32_of = [&](const Tensor& weights) {
      model::ParamBuffer wide(table_, DType::kFloat32);
      ops::cast(wide.flat(), weights);
      return host_values(wide.flat());
    };
    const double params = relative_difference(fp32_of(gpu.optimizer.params().flat()),
                                              fp32_of(cpu.optimizer.params().flat()));
    const double master = relative_difference(host_values(gpu.optimizer.master()),
                                              host_values(cpu.optimizer.master()));
    std::printf("relative weight difference after %lld iterations: params %.3g, master %.3g\n",
                static_cast<long long>(kIterations), params, master);
    EXPECT_LE(params, 5e-3);
    EXPECT_LE(master, 5e-3);
    EXPECT_EQ(gpu.optimizer.adam_step(), cpu.optimizer.adam_step());
    return want;
  }

  // Two device runs agree bit for bit, also when the second goes through the host views (a
  // checkpoint's save and load) halfway.
  void expect_deterministic(const train::OptimizerOptions& options) {
    TrainingRun first(tiny_options(), table_, device_, initial_.flat(), options);
    TrainingRun second(tiny_options(), table_, device_, initial_.flat(), options);
    for (std::int64_t it = 0; it < 20; ++it) {
      EXPECT_EQ(first.iteration(it), second.iteration(it)) << "iteration " << it;
    }
    second.optimizer.copy_state_to_host();
    TrainingRun resumed(tiny_options(), table_, device_, initial_.flat(), options);
    for (const auto& [to, from] :
         {std::pair{resumed.optimizer.params().flat(), second.optimizer.params().flat()},
          std::pair{resumed.optimizer.master(), second.optimizer.master()},
          std::pair{resumed.optimizer.exp_avg(), second.optimizer.exp_avg()},
          std::pair{resumed.optimizer.exp_avg_sq(), second.optimizer.exp_avg_sq()}}) {
      EXPECT_EQ(to.device(), tensor::Device{});
      tensor::copy(to, from);
    }
    resumed.optimizer.set_adam_step(second.optimizer.adam_step());
    resumed.optimizer.load_loss_scaler_state(second.optimizer.loss_scaler().state());
    resumed.optimizer.set_last_grad_norm(second.optimizer.last_grad_norm());
    resumed.optimizer.restore_from_checkpoint(train::RestoreSource::kAsLoaded);
    for (std::int64_t it = 20; it < kIterations; ++it) {
      const double a = first.iteration(it), b = second.iteration(it), c = resumed.iteration(it);
      EXPECT_EQ(a, b) << "iteration " << it;
      EXPECT_EQ(a, c) << "iteration " << it;
      EXPECT_EQ(first.last_step.skipped, resumed.last_step.skipped) << "iteration " << it;
    }
    first.optimizer.copy_state_to_host();
    resumed.optimizer.copy_state_to_host();
    EXPECT_EQ(host_values(first.optimizer.master()), host_values(resumed.optimizer.master()));
  }

  ParamTable table_;
  model::ParamBuffer initial_;
  ops::DeviceContext host_;
  ops::DeviceContext device_;
};

TEST_F(MixedPrecisionTrainingOnDevice, Bf16LossesFollowTheHostRun) {
  EXPECT_EQ(expect_device_follows_host(bf16_adam()).skips(), 0);
}

TEST_F(MixedPrecisionTrainingOnDevice, Fp16SkipsTheSameStepsAndFollowsTheHostRun) {
  // The skip path ran on both sides (the device's skips equal the host's), and not only it.
  const Trace host = expect_device_follows_host(fp16_adam());
  EXPECT_GT(host.skips(), 0);
  EXPECT_LT(host.skips(), kIterations);
}

// ZeRO stages 1 and 2 in one process: the partitions are whole groups, the reduce-scatter only
// the communication dtype's rounding; the same skips (ZeRO's scaler, with hysteresis 1) and losses
// as the host.
TEST_F(MixedPrecisionTrainingOnDevice, ZeroStagesFollowTheHostRun) {
  for (const int stage : {1, 2}) {
    SCOPED_TRACE(stage);
    const Trace fp16 = expect_device_follows_host(zero(fp16_adam(), stage));
    EXPECT_GT(fp16.skips(), 0);
    EXPECT_LT(fp16.skips(), kIterations);
    EXPECT_EQ(expect_device_follows_host(zero(gpu_test::fp32_adam(), stage)).skips(), 0);
  }
}

TEST_F(MixedPrecisionTrainingOnDevice, ZeroStagesAreDeterministicThroughHostViews) {
  expect_deterministic(zero(fp16_adam(), 1));
  expect_deterministic(zero(fp16_adam(), 2));
}

TEST_F(MixedPrecisionTrainingOnDevice, Bf16IsDeterministicThroughHostViews) {
  expect_deterministic(bf16_adam());
}

TEST_F(MixedPrecisionTrainingOnDevice, Fp16IsDeterministicThroughHostViews) {
  expect_deterministic(fp16_adam());
}

}  // namespace
}  // namespace mds
