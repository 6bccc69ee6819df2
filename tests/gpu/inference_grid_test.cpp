// Inference on a T × P grid and on D replicas on a CUDA device, in one process: the ranks run on
// threads, each with its shard on cuda:0 (tasks::place_on_device, a DeviceContext per rank) and
// the groups tasks::inference_groups makes for a device with --distributed-backend gloo (in-process
// host groups wrapped in HostStagedCommunicator: device TP sums and stage-to-stage hidden states),
// against the same grid on the host: the last stage's logits within 1e-4 relative, the same greedy
// tokens, WikiText loss within 1e-5 relative, the same LAMBADA count. The multi-process runs are
// tests/gpu/inference_device_grid_test.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../unit/inference_grid_harness.h"
#include "model/init.h"
#include "model/pipeline_partition.h"
#include "model/tp_merge.h"
#include "tasks/generation.h"
#include "tasks/gpt_inference.h"
#include "tasks/inference_comms.h"
#include "tasks/inference_device.h"
#include "tasks/zero_shot.h"
#include "tensor/device_memory.h"

namespace mds {
namespace {

using tensor::DType;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};

model::ModelOptions tiny_options() {
  model::ModelOptions o;
  o.config.num_layers = 4;
  o.config.hidden_size = 64;
  o.config.num_attention_heads = 4;  // head dim 16, two heads per rank at T = 2
  o.config.seq_length = 32;
  o.config.max_position_embeddings = 40;
  o.config.padded_vocab_size = 128;
  o.hidden_dropout = 0.0f;
  o.attention_dropout = 0.0f;
  o.micro_batch_size = 2;
  o.apply_query_key_layer_scaling = true;
  return o;
}

// The whole model on the host, weights large enough for peaked, varied logits.
tasks::InferenceModel whole_model() {
  tasks::InferenceModel m;
  m.options = tiny_options();
  m.table = std::make_unique<model::ParamTable>(model::ParamTable::build(m.options.config));
  m.params = std::make_unique<model::ParamBuffer>(*m.table, DType::kFloat32);
  model::initialize_parameters(*m.params, 1234);
  float* data = m.params->flat().data<float>();
  for (std::int64_t i = 0; i < m.params->flat().numel(); ++i) {
    data[i] = data[i] * 8.0f + 0.05f * std::sin(0.37f * static_cast<float>(i));
  }
  m.vocab_size = 120;
  return m;
}

std::vector<std::int64_t> sequence(std::int64_t n, std::int64_t salt) {
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) tokens[static_cast<std::size_t>(i)] = (i * 7 + salt) % 120;
  return tokens;
}

struct Grid {
  int tp, pp, dp = 1;
  std::string name() const {
    return std::to_string(tp) + "×" + std::to_string(pp) + "×" + std::to_string(dp);
  }
};

// What one rank computes: the last stage's logits of one sequence, greedy tokens (one replica),
// the WikiText loss and the LAMBADA count over the replicas.
struct Outcome {
  std::vector<float> logits;
  std::vector<std::vector<std::int64_t>> tokens;
  double loss = 0.0;
  std::int64_t correct = 0;
};

struct Workload {
  std::vector<std::int64_t> tokens = sequence(21, 5);
  std::vector<tasks::GenerationRow> rows{{sequence(3, 1), 0}, {sequence(7, 2), 1}};
  tasks::GenerationOptions greedy;
  tasks::WikitextData wikitext;
  std::vector<tasks::LambadaExample> examples;

  explicit Workload(const tasks::InferenceModel& whole) {
    greedy.sampling.greedy = true;
    greedy.seq_length = 32;
    greedy.out_seq_length = 16;
    greedy.eod = 119;
    greedy.vocab_size = 120;
    wikitext.tokens = sequence(150, 4);
    wikitext.num_tokenized_tokens = 150;
    wikitext.num_original_tokens = 120;
    // Targets the whole model gets right (its greedy next token) and ones it does not.
    const tasks::GptInference inference(whole.options, *whole.table, *whole.params);
    for (std::int64_t e = 0; e < 12; ++e) {
      const std::vector<std::int64_t> context = sequence(4 + e, e);
      const std::vector<float> logits = inference.full_logits(context);
      const float* last = logits.data() + (context.size() - 1) * 128;
      const std::int64_t best = std::max_element(last, last + 120) - last;
      examples.push_back({context, {e % 2 == 0 ? best : (best + 1) % 120}});
    }
  }

  Outcome run(const tasks::InferenceModel& m) const {
    Outcome o;
    const tasks::GptInference inference(m.options, *m.table, *m.params, m.comms, m.device.get());
    o.logits = inference.full_logits(tokens);
    if (m.comms.dp_size == 1) {
      for (const tasks::GenerationResult& r : tasks::generate(inference, rows, greedy)) {
        o.tokens.push_back(r.tokens);
      }
    }
    o.loss = tasks::evaluate_wikitext(m, wikitext, 119, 8).total_loss;
    o.correct = tasks::evaluate_lambada(m, examples).correct;
    return o;
  }
};

// Runs the workload on every rank of `grid`, each rank's shard and groups for `device`; returns
// the outcomes in rank order.
std::vector<Outcome> run_grid(const tasks::InferenceModel& whole, const Workload& work, Grid grid,
                              tensor::Device device) {
  return test::run_inference_grid<Outcome>(
      whole,
      {.tp = grid.tp,
       .pp = grid.pp,
       .dp = grid.dp,
       .groups_for = device,
       .model_on = device,
       .label = grid.name(),
       // Short: a rank that throws leaves its peers waiting this long before the errors print.
       .patience = std::chrono::seconds(15)},
      [&](const tasks::InferenceModel& m) { return work.run(m); });
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

TEST(InferenceGridOnDevice, EveryGridFollowsTheSameGridOnTheHost) {
  const tasks::InferenceModel whole = whole_model();
  const Workload work(whole);
  for (const Grid grid : {Grid{2, 1}, Grid{1, 2}, Grid{2, 2}, Grid{1, 1, 2}, Grid{2, 1, 2}}) {
    const std::vector<Outcome> host = run_grid(whole, work, grid, tensor::Device{});
    const auto start = std::chrono::steady_clock::now();
    const std::vector<Outcome> device = run_grid(whole, work, grid, kCuda0);
    std::printf("[ grid     ] %s on the device: %.1f s\n", grid.name().c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::fflush(stdout);
    if (HasFailure()) return;  // a rank failed: its error is above; the next grids would repeat it
    ASSERT_EQ(host.size(), device.size());
    for (std::size_t rank = 0; rank < host.size(); ++rank) {
      const std::string where = grid.name() + " rank " + std::to_string(rank);
      const bool last_stage = static_cast<int>(rank) / (grid.tp * grid.dp) == grid.pp - 1;
      EXPECT_EQ(device[rank].logits.empty(), !last_stage) << where;
      if (last_stage) {
        // tests/gpu/inference_test.cpp's kLogitsBound: the same ill-conditioned model.
        EXPECT_LE(relative_difference(device[rank].logits, host[rank].logits), 1e-4) << where;
      }
      EXPECT_EQ(device[rank].tokens, host[rank].tokens) << where;
      EXPECT_NEAR(device[rank].loss, host[rank].loss, 1e-5 * std::fabs(host[rank].loss)) << where;
      EXPECT_EQ(device[rank].correct, host[rank].correct) << where;
    }
    EXPECT_GT(host[0].correct, 0) << grid.name();
    EXPECT_LT(host[0].correct, 12) << grid.name();
    if (grid.dp == 1) {
      EXPECT_EQ(host[0].tokens.size(), 2u) << grid.name();
    }
  }
}

}  // namespace
}  // namespace mds
