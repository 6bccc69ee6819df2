// The fp32 training step on a CUDA device against the same step on the host: a tiny GPT-2
// (dropout on, gradient clipping on, two micro-batches per iteration, AdamW with weight decay)
// trained from one initialization on one stream of data, through GptModel and
// MixedPrecisionOptimizer as the Trainer drives them. The two runs share the dropout masks
// (Philox) and differ only by rounding: summation orders, the flash attention's online softmax,
// the device's transcendentals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "model/gpt_model.h"
#include "model/init.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "ops/device_context.h"
#include "tensor/device_memory.h"
#include "tests/gpu/tiny_gpt_training.h"
#include "train/mixed_precision_optimizer.h"

namespace mds {
namespace {

using gpu_test::Batch;
using gpu_test::fp32_adam;
using gpu_test::host_values;
using gpu_test::kCuda0;
using gpu_test::relative_difference;
using gpu_test::tiny_options;
using gpu_test::TrainingRun;
using model::GptModel;
using model::ModelOptions;
using model::ParamTable;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

class TrainingOnDevice : public ::testing::Test {
 protected:
  TrainingOnDevice()
      : table_(ParamTable::build(tiny_options().config)),
        initial_(table_, DType::kFloat32),
        device_(kCuda0) {
    model::initialize_parameters(initial_, 1234);
  }

  ParamTable table_;
  model::ParamBuffer initial_;
  ops::DeviceContext host_;
  ops::DeviceContext device_;
};

// 100 iterations (200 micro-batches; issue 5's "100 steps in fp32 within 1e-4") on the Markov
// text (tests/unit/tiny_training_conditioning_test.cpp shows it well conditioned): every
// iteration's loss within 1e-4 of the host's, the final weights within 1e-3 (Adam's normalized
// steps carry rounding differences into the weights), the evaluation loss and its per-token
// losses too.
TEST_F(TrainingOnDevice, LossesFollowTheHostRun) {
  const ModelOptions options = tiny_options();
  TrainingRun cpu(options, table_, host_, initial_.flat());
  TrainingRun gpu(options, table_, device_, initial_.flat());
  // A text the model learns: on random tokens even two host runs part after ~90 iterations.
  cpu.text = gpu.text = gpu_test::Text::kMarkov;
  EXPECT_EQ(gpu.model.device(), kCuda0);
  EXPECT_EQ(gpu.optimizer.device(), kCuda0);
  double worst = 0.0;
  constexpr std::int64_t kIterations = 100;
  for (std::int64_t it = 0; it < kIterations; ++it) {
    const double want = cpu.iteration(it), got = gpu.iteration(it);
    ASSERT_TRUE(std::isfinite(got)) << "iteration " << it;
    const double relative = std::abs(got - want) / std::abs(want);
    worst = std::max(worst, relative);
    EXPECT_LE(relative, 1e-4) << "iteration " << it << ": device " << got << ", host " << want;
  }
  std::printf("worst relative loss difference over %lld iterations: %.3g\n",
              static_cast<long long>(kIterations), worst);
  gpu.optimizer.copy_state_to_host();
  const double weights = relative_difference(host_values(gpu.optimizer.params().flat()),
                                             host_values(cpu.optimizer.params().flat()));
  std::printf("relative weight difference after %lld iterations: %.3g\n",
              static_cast<long long>(kIterations), weights);
  EXPECT_LE(weights, 1e-3);
  std::vector<float> cpu_tokens, gpu_tokens;
  const double cpu_eval = cpu.evaluate(cpu_tokens), gpu_eval = gpu.evaluate(gpu_tokens);
  EXPECT_LE(std::abs(gpu_eval - cpu_eval), 1e-4 * std::abs(cpu_eval));
  EXPECT_LE(relative_difference(gpu_tokens, cpu_tokens), 1e-4);
}

// The device kernels are deterministic: two device runs agree bit for bit, and so does a run
// whose optimizer went through the host views (a checkpoint's save and load) halfway, and one
// that recomputes its activations in the backward.
TEST_F(TrainingOnDevice, DeterministicThroughHostViewsAndRecomputation) {
  const ModelOptions options = tiny_options();
  ModelOptions recomputing = options;
  recomputing.checkpoint_activations = true;
  TrainingRun first(options, table_, device_, initial_.flat());
  TrainingRun second(recomputing, table_, device_, initial_.flat());
  for (std::int64_t it = 0; it < 5; ++it) EXPECT_EQ(first.iteration(it), second.iteration(it));
  // A "checkpoint": the host views of `first` written into a fresh optimizer's host views.
  first.optimizer.copy_state_to_host();
  TrainingRun resumed(options, table_, device_, initial_.flat());
  for (const auto& [to, from] :
       {std::pair{resumed.optimizer.params().flat(), first.optimizer.params().flat()},
        std::pair{resumed.optimizer.exp_avg(), first.optimizer.exp_avg()},
        std::pair{resumed.optimizer.exp_avg_sq(), first.optimizer.exp_avg_sq()}}) {
    EXPECT_EQ(to.device(), tensor::Device{});
    tensor::copy(to, from);
  }
  resumed.optimizer.set_adam_step(first.optimizer.adam_step());
  resumed.optimizer.restore_from_checkpoint(train::RestoreSource::kAsLoaded);
  for (std::int64_t it = 5; it < 10; ++it) {
    const double a = first.iteration(it), b = second.iteration(it), c = resumed.iteration(it);
    EXPECT_EQ(a, b) << "iteration " << it;
    EXPECT_EQ(a, c) << "iteration " << it;
  }
}

TEST_F(TrainingOnDevice, WhatTheDevicePathDoesNotDoYetFailsWithOneLine) {
  ModelOptions stage = tiny_options();
  stage.config.stage_end_spec = 4;  // the embedding and the first layer: a pipeline stage
  const ParamTable stage_table = ParamTable::build(stage.config);
  {
    // A stage runs on the device; its hidden tensors must be there too.
    GptModel model(stage, stage_table, nullptr, 1, &device_);
    model::ParamBuffer params(stage_table, DType::kFloat32, kCuda0);
    std::vector<float> host(static_cast<std::size_t>(32 * 2 * 64));
    const Tensor output(host.data(), DType::kFloat32, Shape{32, 2, 64});
    Batch batch(stage, 0, 0);
    try {
      model.forward_stage(0, params, batch.view(stage), {}, {}, output);
      FAIL() << "no error";
    } catch (const base::Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "GptModel: output_hidden must be an fp32 [32, 2, 64] tensor on cuda:0 on pipeline "
                "stage [0, 4), got float32 [32, 2, 64] on cpu");
    }
  }
  // Host parameters given to a device model.
  const ModelOptions options = tiny_options();
  GptModel model(options, table_, nullptr, 1, &device_);
  model::ParamBuffer grads(table_, DType::kFloat32, kCuda0);
  Batch batch(options, 0, 0);
  try {
    model.forward_backward(initial_, grads, batch.view(options), {}, 1.0f);
    FAIL() << "no error";
  } catch (const base::Error& e) {
    EXPECT_EQ(std::string(e.what()), "GptModel: params are on cpu but the model runs on cuda:0");
  }
}

}  // namespace
}  // namespace mds
