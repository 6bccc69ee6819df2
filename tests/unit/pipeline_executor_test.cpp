// PipelineExecutor in one process: the stages run on threads over an in-process communicator, and
// the loss every stage returns and the gradients after ReduceTiedGrads equal the whole model's.
// (tests/e2e/pipeline_executor_test.sh runs the same under mpirun, with T = 2 as well.)
#include "train/pipeline_executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "model/gpt_model.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/pipeline_partition.h"
#include "random_micro_batch.h"
#include "thread_communicator.h"
#include "train/pipeline_schedule.h"

namespace mds::train {
namespace {

using model::DropoutContext;
using model::GptModel;
using model::MicroBatch;
using model::ModelOptions;
using model::ParamBuffer;
using model::ParamTable;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

using test::Mailboxes;
using test::ThreadCommunicator;

ModelOptions tiny_options() {
  ModelOptions o;
  o.config.num_layers = 4;
  o.config.hidden_size = 32;
  o.config.num_attention_heads = 4;
  o.config.seq_length = 16;
  o.config.max_position_embeddings = 16;
  o.config.padded_vocab_size = 128;
  o.micro_batch_size = 2;
  o.hidden_dropout = 0.1f;
  o.attention_dropout = 0.1f;
  return o;
}

// Holes in the loss mask at i mod 5 == 1.
struct BatchData : test::RandomMicroBatch {
  BatchData(const ModelOptions& o, std::uint32_t seed) : RandomMicroBatch(o, seed, 5, 1) {}
};

DropoutContext dropout_for(std::int64_t mb) {
  return DropoutContext{5, 2, static_cast<std::uint64_t>(mb), true};
}

DropoutContext no_dropout(std::int64_t) {
  return DropoutContext{5, 2, 0, false};
}

// The whole model's parameters, loss sum and gradients over the micro-batches.
struct Whole {
  ParamTable table;
  ParamBuffer params, grads;
  double loss = 0.0, eval_loss = 0.0;

  Whole(const ModelOptions& o, std::vector<BatchData>& batches, float loss_scale)
      : table(ParamTable::build(o.config)),
        params(table, DType::kFloat32),
        grads(table, DType::kFloat32) {
    std::mt19937 gen(3);
    for (std::size_t p = 0; p < table.size(); ++p) {
      const bool ones = table[p].init == model::InitKind::kOnes;
      std::uniform_real_distribution<float> dist(ones ? 0.7f : -0.2f, ones ? 1.3f : 0.2f);
      for (float& x : params.view(p).host_span<float>()) x = dist(gen);
    }
    GptModel model(o, table);
    for (std::size_t m = 0; m < batches.size(); ++m) {
      loss += model.forward_backward(params, grads, batches[m].view(),
                                     dropout_for(static_cast<std::int64_t>(m)), loss_scale);
    }
    for (std::size_t m = 0; m < batches.size(); ++m) {
      eval_loss += model.forward_loss(params, batches[m].view(), no_dropout(0));
    }
  }
};

// One stage's parameters (copied from the whole model's) and gradients.
struct StageState {
  std::unique_ptr<ParamTable> table;
  std::unique_ptr<ParamBuffer> params, grads;
  double loss = 0.0, eval_loss = 0.0;
  std::int64_t loads = 0, backwards = 0;
  std::string error;
};

void expect_executor_matches(const ModelOptions& o, std::int64_t stages, const std::string& method,
                             std::int64_t micro_batches) {
  SCOPED_TRACE(method + " on " + std::to_string(stages) + " stages");
  std::vector<BatchData> batches;
  for (std::int64_t m = 0; m < micro_batches; ++m) {
    batches.emplace_back(o, 40 + static_cast<std::uint32_t>(m));
  }
  const float loss_scale = 1.0f / static_cast<float>(micro_batches);
  const Whole whole(o, batches, loss_scale);
  const std::vector<std::int64_t> parts =
      model::pipeline_partition(o.config, false, stages, method);

  auto pp_mail = std::make_shared<Mailboxes>();
  auto embed_mail = std::make_shared<Mailboxes>();
  std::vector<StageState> states(static_cast<std::size_t>(stages));
  std::vector<std::thread> threads;
  for (std::int64_t k = 0; k < stages; ++k) {
    threads.emplace_back([&, k] {
      StageState& state = states[static_cast<std::size_t>(k)];
      try {
        ModelOptions options = o;
        model::set_stage_specs(options.config, parts, k);
        state.table = std::make_unique<ParamTable>(ParamTable::build(options.config));
        state.params = std::make_unique<ParamBuffer>(*state.table, DType::kFloat32);
        state.grads = std::make_unique<ParamBuffer>(*state.table, DType::kFloat32);
        for (std::size_t p = 0; p < state.table->size(); ++p) {
          const auto& spec = (*state.table)[p];
          const auto from =
              whole.params.view(whole.table.index_of(spec.layer, spec.name)).host_span<float>();
          std::copy(from.begin(), from.end(), state.params->view(p).host_span<float>().begin());
        }
        GptModel model(options, *state.table, nullptr,
                       static_cast<int>(num_pipe_buffers(micro_batches, stages, k)));
        ThreadCommunicator pp("pp", pp_mail, static_cast<int>(k), static_cast<int>(stages));
        const bool tied = stages > 1 && (k == 0 || k == stages - 1);
        ThreadCommunicator embedding("embedding", embed_mail, k == 0 ? 0 : 1, 2);
        PipelineExecutor executor(model, &pp, tied ? &embedding : nullptr);
        PipelineStepInput input;
        input.micro_batches = micro_batches;
        input.load = [&](std::int64_t mb) {
          ++state.loads;
          return batches[static_cast<std::size_t>(mb)].view();
        };
        input.dropout = dropout_for;
        input.loss_scale = loss_scale;
        input.after_backward = [&](std::int64_t) { ++state.backwards; };
        state.loss = executor.train_step(*state.params, *state.grads, input);
        input.dropout = no_dropout;  // evaluation: InferenceSchedule, forward only
        state.eval_loss = executor.eval_step(*state.params, input);
      } catch (const std::exception& e) {
        state.error = e.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  for (std::int64_t k = 0; k < stages; ++k) {
    const StageState& state = states[static_cast<std::size_t>(k)];
    ASSERT_EQ(state.error, "") << "stage " << k;
    EXPECT_NEAR(state.loss, whole.loss, 1e-6 * std::fabs(whole.loss)) << "stage " << k;
    EXPECT_NEAR(state.eval_loss, whole.eval_loss, 1e-6 * std::fabs(whole.eval_loss))
        << "stage " << k;
    EXPECT_EQ(state.backwards, micro_batches);
    EXPECT_EQ(state.loads, k == 0 || k == stages - 1 ? 2 * micro_batches : 0) << "stage " << k;
    for (std::size_t p = 0; p < state.table->size(); ++p) {
      const auto& spec = (*state.table)[p];
      const auto got = state.grads->view(p).host_span<float>();
      const bool unused = spec.tied_replica && spec.name != "word_embeddings.weight";
      const auto want =
          whole.grads.view(whole.table.index_of(spec.layer, spec.name)).host_span<float>();
      for (std::size_t i = 0; i < got.size(); ++i) {
        const float expected = unused ? 0.0f : want[i];
        ASSERT_NEAR(got[i], expected, 1e-5 + 1e-5 * std::fabs(expected))
            << "stage " << k << " " << spec.engine_name() << "[" << i << "]";
      }
    }
  }
}

TEST(PipelineExecutor, OneStageEqualsTheWholeModel) {
  expect_executor_matches(tiny_options(), 1, "uniform", 3);
}

TEST(PipelineExecutor, TwoStagesEqualTheWholeModel) {
  expect_executor_matches(tiny_options(), 2, "type:transformer", 4);
}

TEST(PipelineExecutor, ThreeStagesEqualTheWholeModel) {
  expect_executor_matches(tiny_options(), 3, "uniform", 5);
  ModelOptions o = tiny_options();
  o.checkpoint_activations = true;
  o.checkpoint_num_layers = 2;
  expect_executor_matches(o, 3, "parameters", 2);
}

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

TEST(PipelineExecutor, RejectsAModelOfAnotherStageOrTooFewBuffers) {
  ModelOptions o = tiny_options();
  const ParamTable table = ParamTable::build(o.config);
  ParamBuffer params(table, DType::kFloat32), grads(table, DType::kFloat32);
  GptModel one_buffer(o, table);
  PipelineExecutor executor(one_buffer, nullptr, nullptr);
  PipelineStepInput input;
  input.micro_batches = 2;
  input.dropout = dropout_for;
  BatchData data(o, 1);
  input.load = [&](std::int64_t) { return data.view(); };
  EXPECT_NE(error_of([&] {
              executor.train_step(params, grads, input);
            }).find("with 2 micro-batches needs 2 pipe buffers, the model has 1"),
            std::string::npos);

  ModelOptions first = o;
  model::set_stage_specs(first.config, model::pipeline_partition(o.config, false, 2, "uniform"), 0);
  const ParamTable first_table = ParamTable::build(first.config);
  GptModel first_stage(first, first_table, nullptr, 2);
  EXPECT_NE(error_of([&] {
              PipelineExecutor wrong(first_stage, nullptr, nullptr);
            }).find("stage 0 of 1 holds specs [0, 5): the first stage and only it"),
            std::string::npos);
  auto mail = std::make_shared<Mailboxes>();
  ThreadCommunicator second("pp", mail, 1, 2);
  EXPECT_NE(error_of([&] {
              PipelineExecutor wrong(first_stage, &second, nullptr);
            }).find("stage 1 of 2 holds specs [0, 5)"),
            std::string::npos);
}

}  // namespace
}  // namespace mds::train
