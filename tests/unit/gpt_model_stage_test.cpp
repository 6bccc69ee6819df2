// A GPT split into pipeline stages and run through the 1F1B schedule equals the whole model:
// losses, every layer's gradient, and the tied word embedding's gradient once the first stage's
// and the last stage's replica gradients are summed (training.md §3.2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "model/activation_plan.h"
#include "model/gpt_model.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/pipeline_partition.h"
#include "random_micro_batch.h"
#include "train/pipeline_schedule.h"

namespace mds::model {
namespace {

using tensor::DType;
using tensor::Shape;
using tensor::Tensor;
using train::Instruction;
using train::InstructionKind;

ModelOptions stage_options() {
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

// Host data of one micro-batch.
// Holes in the loss mask at i mod 7 == 2.
struct BatchData : test::RandomMicroBatch {
  BatchData(const ModelOptions& o, std::uint32_t seed) : RandomMicroBatch(o, seed, 7, 2) {}
};

DropoutContext dropout_for(std::int64_t micro_batch) {
  return DropoutContext{4321, 7, static_cast<std::uint64_t>(micro_batch), true};
}

// The whole model with random parameters, and its losses and gradients over the micro-batches.
struct Reference {
  std::unique_ptr<ParamTable> table;
  std::unique_ptr<ParamBuffer> params, grads;
  double loss = 0.0;

  Reference(const ModelOptions& o, std::vector<BatchData>& batches, float loss_scale) {
    table = std::make_unique<ParamTable>(ParamTable::build(o.config));
    params = std::make_unique<ParamBuffer>(*table, DType::kFloat32);
    grads = std::make_unique<ParamBuffer>(*table, DType::kFloat32);
    std::mt19937 gen(11);
    for (std::size_t p = 0; p < table->size(); ++p) {
      const bool ones = (*table)[p].init == InitKind::kOnes;
      std::uniform_real_distribution<float> dist(ones ? 0.7f : -0.2f, ones ? 1.3f : 0.2f);
      for (float& x : params->view(p).host_span<float>()) x = dist(gen);
    }
    GptModel model(o, *table);
    for (std::size_t m = 0; m < batches.size(); ++m) {
      loss += model.forward_backward(*params, *grads, batches[m].view(true, true),
                                     dropout_for(static_cast<std::int64_t>(m)), loss_scale,
                                     GradientWrite::kAdd);
    }
  }
};

// One stage: its model, its parameters copied from the reference, its gradients. Each backward
// writes a micro-batch's gradient over `micro` (NaNs at first), which is then added into `grads`,
// as the trainer's optimizer does.
struct Stage {
  ModelOptions options;
  std::unique_ptr<ParamTable> table;
  std::unique_ptr<ParamBuffer> params, grads, micro;
  std::unique_ptr<GptModel> model;
  std::vector<std::vector<float>> outputs;  // per buffer: what SendActivation sends
  std::vector<float> recv_grad, send_grad;

  Stage(const ModelOptions& whole, const std::vector<std::int64_t>& parts, std::int64_t stage,
        int buffers, const Reference& reference)
      : options(whole) {
    set_stage_specs(options.config, parts, stage);
    table = std::make_unique<ParamTable>(ParamTable::build(options.config));
    params = std::make_unique<ParamBuffer>(*table, DType::kFloat32);
    grads = std::make_unique<ParamBuffer>(*table, DType::kFloat32);
    micro = std::make_unique<ParamBuffer>(*table, DType::kFloat32);
    for (float& g : micro->flat().host_span<float>()) g = std::nanf("");
    for (std::size_t p = 0; p < table->size(); ++p) {
      const ParamSpec& spec = (*table)[p];
      const auto from = reference.params->view(reference.table->index_of(spec.layer, spec.name));
      const auto to = params->view(p).host_span<float>();
      std::copy(from.host_span<float>().begin(), from.host_span<float>().end(), to.begin());
    }
    model = std::make_unique<GptModel>(options, *table, nullptr, buffers);
    const auto hidden = static_cast<std::size_t>(
        options.config.seq_length * options.micro_batch_size * options.config.hidden_size);
    outputs.assign(static_cast<std::size_t>(buffers), std::vector<float>(hidden));
    recv_grad.resize(hidden);
    send_grad.resize(hidden);
  }

  Tensor hidden(std::vector<float>& data) const {
    return Tensor(
        data.data(), DType::kFloat32,
        Shape{options.config.seq_length, options.micro_batch_size, options.config.hidden_size});
  }
};

struct SplitRun {
  std::vector<std::unique_ptr<Stage>> stages;
  double loss = 0.0;
};

// Runs every stage's TrainSchedule step by step, as the ranks would in parallel: at step t each
// send passes on what an earlier step computed, so all sends of the step go first into
// mailboxes, then each stage receives and computes.
// With `fused_last` the last stage runs each micro-batch's forward and backward in one
// forward_backward_stage call at its ForwardPass (as PipelineExecutor does), its BackwardPass
// then adding the gradient only.
bool run_pipeline(const ModelOptions& whole, const std::vector<std::int64_t>& parts,
                  std::int64_t micro_batches, std::vector<BatchData>& batches,
                  const Reference& reference, float loss_scale, SplitRun& run,
                  bool fused_last = false) {
  const auto num_stages = static_cast<std::int64_t>(parts.size()) - 1;
  std::vector<train::PipeSchedule> schedules;
  for (std::int64_t k = 0; k < num_stages; ++k) {
    const auto buffers = static_cast<int>(train::num_pipe_buffers(micro_batches, num_stages, k));
    run.stages.push_back(std::make_unique<Stage>(whole, parts, k, buffers, reference));
    schedules.push_back(train::train_schedule(micro_batches, num_stages, k));
  }
  // (to stage, is gradient) -> messages in order.
  std::map<std::pair<std::int64_t, bool>, std::deque<std::vector<float>>> mail;
  const auto steps = schedules[0].size();
  for (std::size_t t = 0; t < steps; ++t) {
    for (std::int64_t k = 0; k < num_stages; ++k) {
      Stage& stage = *run.stages[static_cast<std::size_t>(k)];
      for (const Instruction& in : schedules[static_cast<std::size_t>(k)][t]) {
        if (in.kind == InstructionKind::kSendActivation) {
          mail[{k + 1, false}].push_back(stage.outputs[static_cast<std::size_t>(in.buffer)]);
        } else if (in.kind == InstructionKind::kSendGrad) {
          mail[{k - 1, true}].push_back(stage.send_grad);
        }
      }
    }
    for (std::int64_t k = 0; k < num_stages; ++k) {
      Stage& stage = *run.stages[static_cast<std::size_t>(k)];
      GptModel& model = *stage.model;
      std::int64_t micro_batch = -1;
      for (const Instruction& in : schedules[static_cast<std::size_t>(k)][t]) {
        const int buffer = static_cast<int>(in.buffer);
        switch (in.kind) {
          case InstructionKind::kRecvActivation: {
            auto& box = mail[{k, false}];
            if (box.empty()) {
              ADD_FAILURE() << "stage " << k << " receives nothing at step " << t;
              return false;
            }
            // Straight into the buffer's own input: forward_stage then copies nothing.
            std::copy(box.front().begin(), box.front().end(),
                      model.stage_input(buffer).host_span<float>().begin());
            box.pop_front();
            break;
          }
          case InstructionKind::kRecvGrad: {
            auto& box = mail[{k, true}];
            if (box.empty()) {
              ADD_FAILURE() << "stage " << k << " receives nothing at step " << t;
              return false;
            }
            stage.recv_grad = box.front();
            box.pop_front();
            break;
          }
          case InstructionKind::kLoadMicroBatch:
            micro_batch = in.micro_batch;
            break;
          case InstructionKind::kForwardPass: {
            if (micro_batch < 0) micro_batch = in.micro_batch;
            const MicroBatch batch = batches[static_cast<std::size_t>(in.micro_batch)].view(
                model.owns_embedding(), model.owns_head());
            const Tensor input = model.owns_embedding() ? Tensor{} : model.stage_input(buffer);
            const Tensor output =
                model.owns_head() ? Tensor{}
                                  : stage.hidden(stage.outputs[static_cast<std::size_t>(buffer)]);
            if (fused_last && model.owns_head()) {
              run.loss += model.forward_backward_stage(
                  buffer, *stage.params, *stage.micro, batch, dropout_for(in.micro_batch), input,
                  model.owns_embedding() ? Tensor{} : stage.hidden(stage.send_grad), loss_scale);
              break;
            }
            run.loss += model.forward_stage(buffer, *stage.params, batch,
                                            dropout_for(in.micro_batch), input, output);
            break;
          }
          case InstructionKind::kBackwardPass: {
            if (!(fused_last && model.owns_head())) {
              model.backward_stage(
                  buffer, *stage.params, *stage.micro,
                  model.owns_head() ? Tensor{} : stage.hidden(stage.recv_grad),
                  model.owns_embedding() ? Tensor{} : stage.hidden(stage.send_grad), loss_scale,
                  GradientWrite::kOverwrite);
            }
            const auto micro = stage.micro->flat().host_span<float>();
            const auto sum = stage.grads->flat().host_span<float>();
            for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += micro[i];
            break;
          }
          default:
            break;  // sends went first; the reductions are the executor's
        }
      }
    }
  }
  bool ok = true;
  for (const auto& [key, box] : mail) {
    if (!box.empty()) ADD_FAILURE() << "messages left for stage " << key.first;
    ok = ok && box.empty();
  }
  return ok;
}

void expect_split_matches(ModelOptions o, std::int64_t num_stages, const std::string& method,
                          bool half_precision, std::int64_t micro_batches) {
  const float loss_scale = 1.0f / static_cast<float>(micro_batches);
  std::vector<BatchData> batches;
  for (std::int64_t m = 0; m < micro_batches; ++m) {
    batches.emplace_back(o, 100 + static_cast<std::uint32_t>(m));
  }
  const Reference reference(o, batches, loss_scale);
  const std::vector<std::int64_t> parts =
      pipeline_partition(o.config, half_precision, num_stages, method);
  std::ostringstream where;
  where << method << " parts";
  for (std::int64_t p : parts) where << ' ' << p;
  SCOPED_TRACE(where.str());
  SplitRun run;
  if (!run_pipeline(o, parts, micro_batches, batches, reference, loss_scale, run)) return;

  EXPECT_NEAR(run.loss, reference.loss, 1e-6 * std::fabs(reference.loss));
  // Every reference parameter is owned by exactly one stage, the word embedding by the first;
  // the last stage's replica gradient joins it.
  std::vector<float> word_grad;
  std::size_t compared = 0;
  const std::size_t word =
      reference.table->index_of(GptConfig::kEmbeddingSpec, "word_embeddings.weight");
  const auto ref_word = reference.grads->view(word).host_span<float>();
  word_grad.assign(ref_word.size(), 0.0f);
  for (const auto& stage : run.stages) {
    const ParamTable& table = *stage->table;
    for (std::size_t p = 0; p < table.size(); ++p) {
      const ParamSpec& spec = table[p];
      const auto grad = stage->grads->view(p).host_span<float>();
      if (spec.layer == GptConfig::kEmbeddingSpec && spec.name == "word_embeddings.weight") {
        for (std::size_t i = 0; i < grad.size(); ++i) word_grad[i] += grad[i];
        continue;
      }
      if (spec.tied_replica) {  // the replica's position embedding is never used
        for (float g : grad) ASSERT_EQ(g, 0.0f) << spec.engine_name();
        continue;
      }
      const auto expected = reference.grads->view(reference.table->index_of(spec.layer, spec.name))
                                .host_span<float>();
      ++compared;
      for (std::size_t i = 0; i < grad.size(); ++i) {
        ASSERT_NEAR(grad[i], expected[i], 1e-5 + 1e-5 * std::fabs(expected[i]))
            << spec.engine_name() << "[" << i << "]";
      }
    }
  }
  EXPECT_EQ(compared + 1, reference.table->size());
  double word_norm = 0.0;
  for (std::size_t i = 0; i < word_grad.size(); ++i) {
    word_norm += std::fabs(ref_word[i]);
    ASSERT_NEAR(word_grad[i], ref_word[i], 1e-5 + 1e-5 * std::fabs(ref_word[i]))
        << "word_embeddings.weight[" << i << "]";
  }
  EXPECT_GT(word_norm, 0.0);
}

TEST(GptModelStage, TwoStagesMatchTheWholeModel) {
  expect_split_matches(stage_options(), 2, "type:transformer", false, 4);
}

TEST(GptModelStage, ThreeStagesMatchTheWholeModel) {
  expect_split_matches(stage_options(), 3, "type:transformer", true, 5);
  // Uniform over 10 specs: [0, 3) holds the embedding but no layer.
  expect_split_matches(stage_options(), 3, "uniform", false, 4);
}

TEST(GptModelStage, FourStagesOfOneLayerMatchTheWholeModel) {
  expect_split_matches(stage_options(), 4, "type:transformer", true, 6);
}

TEST(GptModelStage, CheckpointedStagesMatchTheWholeModel) {
  ModelOptions o = stage_options();
  o.checkpoint_activations = true;
  expect_split_matches(o, 2, "type:transformer", true, 4);
  o.checkpoint_num_layers = 2;  // chunks counted from each stage's first spec
  expect_split_matches(o, 2, "type:transformer", true, 4);
  expect_split_matches(o, 3, "parameters", false, 4);
}

// --embed-layernorm's LayerNorm belongs to the first stage's embedding, not to the last stage's
// tied replica.
TEST(GptModelStage, EmbeddingLayerNormStagesMatchTheWholeModel) {
  ModelOptions o = stage_options();
  o.config.embed_layernorm = true;
  expect_split_matches(o, 2, "type:transformer", false, 4);
  o.checkpoint_activations = true;
  expect_split_matches(o, 3, "type:transformer", true, 5);
}

// The last stage's forward_backward_stage (the head's loss and logits' gradient in one pass)
// gives every stage the losses, gradients and sent gradients of its forward_stage then
// backward_stage, bit for bit.
TEST(GptModelStage, LastStageInOneCallIsItsTwoCallsBitForBit) {
  const ModelOptions o = stage_options();
  constexpr std::int64_t kMicroBatches = 4;
  std::vector<BatchData> batches;
  for (std::int64_t m = 0; m < kMicroBatches; ++m) {
    batches.emplace_back(o, 200 + static_cast<std::uint32_t>(m));
  }
  const Reference reference(o, batches, 0.25f);
  for (const std::int64_t num_stages : {2, 3}) {
    SCOPED_TRACE(num_stages);
    const std::vector<std::int64_t> parts =
        pipeline_partition(o.config, false, num_stages, "type:transformer");
    SplitRun apart, together;
    ASSERT_TRUE(run_pipeline(o, parts, kMicroBatches, batches, reference, 0.25f, apart));
    ASSERT_TRUE(run_pipeline(o, parts, kMicroBatches, batches, reference, 0.25f, together, true));
    EXPECT_EQ(together.loss, apart.loss);
    for (std::size_t k = 0; k < apart.stages.size(); ++k) {
      const auto a = apart.stages[k]->grads->flat().host_span<float>();
      const auto b = together.stages[k]->grads->flat().host_span<float>();
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0) << "stage " << k;
    }
  }
}

TEST(GptModelStage, StagesHoldTheirBuffersAndLayers) {
  ModelOptions o = stage_options();
  const std::vector<std::int64_t> parts = pipeline_partition(o.config, true, 2, "type:transformer");
  ModelOptions first = o, last = o;
  set_stage_specs(first.config, parts, 0);
  set_stage_specs(last.config, parts, 1);
  const ParamTable first_table = ParamTable::build(first.config);
  const GptModel one(first, first_table, nullptr, 1), three(first, first_table, nullptr, 3);
  EXPECT_TRUE(one.owns_embedding());
  EXPECT_FALSE(one.owns_head());
  EXPECT_GT(three.activation_bytes(), 2 * one.activation_bytes());
  EXPECT_EQ(three.activation_bytes(), Activations::planned_bytes(first, 3));
  // Half the layers each, so both stages need less than the whole model.
  EXPECT_LT(Activations::planned_bytes(first), Activations::planned_bytes(o));
  EXPECT_LT(Activations::planned_bytes(last), Activations::planned_bytes(o));
  first.checkpoint_activations = true;
  EXPECT_EQ(Activations(first).chunks().size(), 2u);
  EXPECT_EQ(Activations(first).stage_layers().first, 0);
  EXPECT_EQ(Activations(last).stage_layers().first, 2);
  EXPECT_EQ(Activations(last).stage_layers().end, 4);
}

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

TEST(GptModelStage, RejectsMisuse) {
  ModelOptions o = stage_options();
  o.hidden_dropout = o.attention_dropout = 0.0f;
  const std::vector<std::int64_t> parts = pipeline_partition(o.config, false, 2, "uniform");
  ModelOptions first = o, last = o;
  set_stage_specs(first.config, parts, 0);
  set_stage_specs(last.config, parts, 1);
  const ParamTable first_table = ParamTable::build(first.config);
  const ParamTable last_table = ParamTable::build(last.config);
  GptModel head(last, last_table, nullptr, 2), embed(first, first_table, nullptr, 2);
  ParamBuffer params(last_table, DType::kFloat32), grads(last_table, DType::kFloat32);
  ParamBuffer first_params(first_table, DType::kFloat32);
  BatchData data(o, 3);
  std::vector<float> hidden(static_cast<std::size_t>(16 * 2 * 32));
  const Tensor h(hidden.data(), DType::kFloat32, Shape{16, 2, 32});

  EXPECT_NE(error_of([&] {
              head.forward_backward(params, grads, data.view(true, true), {}, 1);
            }).find("runs the whole model"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              head.forward_stage(0, params, data.view(true, true), {}, {}, {});
            }).find("input_hidden must be an fp32 [16, 2, 32] tensor on cpu"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              head.forward_stage(0, params, data.view(true, true), {}, h, h);
            }).find("output_hidden must be empty"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              head.forward_stage(2, params, data.view(true, true), {}, h, {});
            }).find("pipe buffer 2 is outside [0, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              head.forward_stage(0, params, data.view(true, false), {}, h, {});
            }).find("MicroBatch.labels"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { head.backward_stage(1, params, grads, {}, h, 1); }).find("holds no forward"),
      std::string::npos);
  // The buffers share the head: a second forward before the first backward cannot be undone.
  head.forward_stage(0, params, data.view(false, true), {}, h, {});
  head.forward_stage(1, params, data.view(false, true), {}, h, {});
  EXPECT_NE(error_of([&] { head.backward_stage(0, params, grads, {}, h, 1); }).find("1F1B"),
            std::string::npos);
  head.backward_stage(1, params, grads, {}, h, 1);
  EXPECT_NE(
      error_of([&] { head.backward_stage(1, params, grads, {}, h, 1); }).find("holds no forward"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              embed.forward_stage(0, first_params, data.view(true, false), {}, h, h);
            }).find("input_hidden must be empty"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              embed.forward_loss(first_params, data.view(true, true), {});
            }).find("runs the whole model"),
            std::string::npos);
  ParamBuffer first_grads(first_table, DType::kFloat32);
  EXPECT_NE(error_of([&] {
              embed.forward_backward_stage(0, first_params, first_grads, data.view(true, false), {},
                                           {}, {}, 1);
            }).find("does not hold the head"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              head.forward_backward_stage(0, params, grads, data.view(false, true), {}, h, {}, 1);
            }).find("input_grad must be an fp32 [16, 2, 32] tensor on cpu"),
            std::string::npos);

  // Boundaries that would pass something other than the residual stream.
  const auto build = [&](std::int64_t first_spec, std::int64_t end_spec) {
    ModelOptions s = o;
    s.config.stage_first_spec = first_spec;
    s.config.stage_end_spec = end_spec;
    return error_of([&] { GptModel model(s, ParamTable::build(s.config)); });
  };
  EXPECT_NE(build(0, 1).find("holds only the input cast"), std::string::npos);
  EXPECT_NE(build(3, 9).find("splits the final LayerNorm (spec 8) from the head (spec 9)"),
            std::string::npos);
  EXPECT_NE(build(10, 11).find("holds only the output cast"), std::string::npos);
  EXPECT_EQ(build(1, 3), "");  // the embedding alone
  EXPECT_EQ(build(2, 3), "");  // only the transpose: the stage passes its input on
}

}  // namespace
}  // namespace mds::model
