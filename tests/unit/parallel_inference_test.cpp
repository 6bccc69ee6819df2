// Inference on a T × P grid (tasks::GptInference, generate, evaluate_wikitext, evaluate_lambada
// with an InferenceComms) against the whole model on one process: the ranks run on threads over an
// in-process communicator, each with its TP shard of its pipeline stage cut from the whole model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/host_staged_communicator.h"
#include "inference_grid_harness.h"
#include "model/init.h"
#include "model/pipeline_partition.h"
#include "model/tp_merge.h"
#include "tasks/generation.h"
#include "tasks/gpt_inference.h"
#include "tasks/inference_model.h"
#include "tasks/replica_items.h"
#include "tasks/zero_shot.h"

namespace mds::tasks {
namespace {

using tensor::DType;

model::ModelOptions whole_options() {
  model::ModelOptions o;
  o.config.num_layers = 3;
  o.config.hidden_size = 32;
  o.config.num_attention_heads = 4;
  o.config.seq_length = 16;
  o.config.max_position_embeddings = 20;
  o.config.padded_vocab_size = 64;
  o.hidden_dropout = 0.0f;
  o.attention_dropout = 0.0f;
  o.micro_batch_size = 2;
  return o;
}

// The whole model with weights large enough for peaked, varied logits.
InferenceModel whole_model() {
  InferenceModel m;
  m.options = whole_options();
  m.table = std::make_unique<model::ParamTable>(model::ParamTable::build(m.options.config));
  m.params = std::make_unique<model::ParamBuffer>(*m.table, DType::kFloat32);
  model::initialize_parameters(*m.params, 1234);
  float* data = m.params->flat().data<float>();
  for (std::int64_t i = 0; i < m.params->flat().numel(); ++i) {
    data[i] = data[i] * 8.0f + 0.05f * std::sin(0.37f * static_cast<float>(i));
  }
  m.vocab_size = 60;
  return m;
}

// Runs `body` on every rank of a tp × pp × dp grid and returns what each rank returned, in rank
// order. The groups are those tasks::inference_groups makes for a run on `groups_for` (staged
// through the host groups for a CUDA device); the model itself stays on the host.
template <typename Result>
std::vector<Result> run_grid(const InferenceModel& whole, int tp, int pp,
                             const std::function<Result(const InferenceModel&)>& body, int dp = 1,
                             tensor::Device groups_for = {}) {
  return test::run_inference_grid<Result>(
      whole, {.tp = tp, .pp = pp, .dp = dp, .groups_for = groups_for, .model_on = {}, .label = ""},
      body);
}

struct Grid {
  int tp, pp, dp = 1;
};
const Grid kGrids[] = {{2, 1}, {1, 2}, {2, 2}, {4, 1}, {1, 3}};
// Evaluation also splits the windows and examples over replicas.
const Grid kEvaluationGrids[] = {{2, 1},    {1, 2},    {2, 2},    {4, 1},   {1, 3},
                                 {1, 1, 2}, {2, 1, 2}, {1, 2, 3}, {1, 1, 5}};

TEST(ParallelInference, LogitsOfTheLastStageMatchTheWholeModel) {
  const InferenceModel whole = whole_model();
  const std::vector<std::int64_t> tokens{5, 9, 2, 33, 17, 8, 41, 0, 12, 59, 3};
  const std::vector<float> expected =
      GptInference(whole.options, *whole.table, *whole.params).full_logits(tokens);
  for (const Grid grid : kGrids) {
    const auto logits = run_grid<std::vector<float>>(whole, grid.tp, grid.pp, [&](const auto& m) {
      return GptInference(m.options, *m.table, *m.params, m.comms).full_logits(tokens);
    });
    for (int rank = 0; rank < grid.tp * grid.pp; ++rank) {
      const std::vector<float>& got = logits[static_cast<std::size_t>(rank)];
      if (rank / grid.tp != grid.pp - 1) {
        EXPECT_TRUE(got.empty()) << "rank " << rank << " is not on the last stage";
        continue;
      }
      ASSERT_EQ(got.size(), expected.size());
      float worst = 0.0f, scale = 0.0f;
      for (std::size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::fabs(got[i] - expected[i]));
        scale = std::max(scale, std::fabs(expected[i]));
      }
      // The ×8 weights amplify the TP sums' other rounding to ~1e-5 of the logits' scale.
      EXPECT_LT(worst, 5e-5f * scale) << grid.tp << "×" << grid.pp << " rank " << rank;
      if (grid.tp == 1) {
        EXPECT_EQ(got, expected) << "a pipeline alone changes no rounding";
      }
    }
  }
}

TEST(ParallelInference, GenerationFollowsTheHeadOnEveryRank) {
  const InferenceModel whole = whole_model();
  GenerationOptions greedy;
  greedy.sampling.greedy = true;
  greedy.seq_length = 16;
  greedy.out_seq_length = 10;
  greedy.eod = 63;
  greedy.vocab_size = 60;
  GenerationOptions sampled = greedy;
  sampled.sampling.greedy = false;
  sampled.sampling.top_k = 20;
  sampled.sampling.temperature = 1.5;
  sampled.seed = 7;
  const std::vector<GenerationRow> rows{{{5, 9, 2}, 0}, {{7}, 1}, {{1, 2, 3, 4, 5, 6}, 2}};
  const auto decode = [&](const InferenceModel& m) {
    const GptInference inference(m.options, *m.table, *m.params, m.comms);
    std::vector<std::vector<std::int64_t>> out;
    for (const GenerationOptions& options : {greedy, sampled}) {
      for (const GenerationResult& result : generate(inference, rows, options)) {
        out.push_back(result.tokens);
      }
    }
    return out;
  };
  const std::vector<std::vector<std::int64_t>> expected = decode(whole);
  bool varied = false;
  for (const auto& tokens : expected) varied = varied || tokens != expected[0];
  EXPECT_TRUE(varied);
  for (const Grid grid : kGrids) {
    const auto results =
        run_grid<std::vector<std::vector<std::int64_t>>>(whole, grid.tp, grid.pp, decode);
    for (int rank = 0; rank < grid.tp * grid.pp; ++rank) {
      EXPECT_EQ(results[static_cast<std::size_t>(rank)], expected)
          << grid.tp << "×" << grid.pp << " rank " << rank;
    }
  }
}

// generate's batches over D replicas (run_items_on_replicas): batch k on replica k mod D, rank 0
// writing every batch's text in batch order, each text what one process decodes for the batch.
TEST(ParallelInference, ReplicasDecodeEveryDthBatchAndRankZeroWritesThemInOrder) {
  const InferenceModel whole = whole_model();
  GenerationOptions sampled;
  sampled.sampling.top_k = 20;
  sampled.sampling.temperature = 1.5;
  sampled.seq_length = 16;
  sampled.out_seq_length = 6;
  sampled.eod = 63;
  sampled.vocab_size = 60;
  sampled.seed = 7;
  constexpr std::int64_t kBatches = 5;  // not a multiple of 2 or 3: the last round is partial
  const auto batch_rows = [](std::int64_t k) {
    std::vector<GenerationRow> rows;
    for (std::int64_t i = 2 * k; i < 2 * k + 2; ++i) {
      rows.push_back({{(i * 7) % 60, (i * 11 + 3) % 60}, static_cast<std::uint64_t>(i)});
    }
    return rows;
  };
  const auto text_of = [](const std::vector<GenerationResult>& results) {
    std::string text;
    for (const GenerationResult& result : results) {
      for (const std::int64_t token : result.tokens) text += std::to_string(token) + " ";
      text += "\n";
    }
    return text;
  };
  std::vector<std::string> expected;
  const GptInference one(whole.options, *whole.table, *whole.params);
  for (std::int64_t k = 0; k < kBatches; ++k) {
    expected.push_back(text_of(generate(one, batch_rows(k), sampled)));
  }
  EXPECT_NE(expected[0], expected[1]);
  struct Written {
    std::vector<std::string> texts;
    std::vector<std::int64_t> items, ran;
  };
  for (const Grid grid : {Grid{1, 1, 2}, Grid{1, 1, 3}, Grid{2, 1, 2}, Grid{1, 2, 2}}) {
    const auto results = run_grid<Written>(
        whole, grid.tp, grid.pp,
        [&](const InferenceModel& m) {
          const GptInference inference(m.options, *m.table, *m.params, m.comms);
          Written w;
          run_items_on_replicas(
              m.comms, kBatches,
              [&](std::int64_t k) {
                w.ran.push_back(k);
                return text_of(generate(inference, batch_rows(k), sampled));
              },
              [&](std::int64_t k, const std::string& text) {
                w.items.push_back(k);
                w.texts.push_back(text);
              });
          return w;
        },
        grid.dp);
    const std::string label =
        std::to_string(grid.tp) + "×" + std::to_string(grid.pp) + "×" + std::to_string(grid.dp);
    EXPECT_EQ(results[0].texts, expected) << label;
    EXPECT_EQ(results[0].items, (std::vector<std::int64_t>{0, 1, 2, 3, 4})) << label;
    for (int rank = 0; rank < grid.tp * grid.pp * grid.dp; ++rank) {
      const Written& w = results[static_cast<std::size_t>(rank)];
      const int dp_rank = rank / grid.tp % grid.dp;
      std::vector<std::int64_t> mine;
      for (std::int64_t k = dp_rank; k < kBatches; k += grid.dp) mine.push_back(k);
      EXPECT_EQ(w.ran, mine) << label << " rank " << rank;
      if (rank != 0) {
        EXPECT_TRUE(w.items.empty()) << label << " rank " << rank << " wrote";
      }
    }
  }
}

WikitextData toy_wikitext() {
  WikitextData wikitext;
  for (std::int64_t i = 0; i < 70; ++i) wikitext.tokens.push_back((i * 37 + 11) % 60);
  wikitext.num_tokenized_tokens = 70;
  wikitext.num_original_tokens = 60;
  return wikitext;
}

// Examples whose target is the whole model's greedy choice (correct) and others (mostly not).
std::vector<LambadaExample> toy_lambada(const InferenceModel& whole) {
  const GptInference inference(whole.options, *whole.table, *whole.params);
  std::vector<LambadaExample> examples;
  for (std::int64_t e = 0; e < 8; ++e) {
    std::vector<std::int64_t> context;
    for (std::int64_t i = 0; i < 4 + e; ++i) context.push_back((e * 13 + i * 7) % 60);
    const std::vector<float> logits = inference.full_logits(context);
    const std::span<const float> last(logits.data() + (context.size() - 1) * 64, 60);
    const std::int64_t target = e % 2 == 0 ? argmax(last) : (argmax(last) + 1) % 60;
    examples.push_back({context, {target}});
  }
  return examples;
}

struct Numbers {
  double loss = 0;
  std::int64_t correct = 0;
};

TEST(ParallelInference, ZeroShotTasksReportTheLastStagesNumbersOnEveryRank) {
  const InferenceModel whole = whole_model();
  const WikitextData wikitext = toy_wikitext();
  const std::vector<LambadaExample> examples = toy_lambada(whole);
  const auto evaluate = [&](const InferenceModel& m) {
    return Numbers{evaluate_wikitext(m, wikitext, 63, 5).total_loss,
                   evaluate_lambada(m, examples).correct};
  };
  const Numbers expected = evaluate(whole);
  EXPECT_GE(expected.correct, 4);
  EXPECT_LT(expected.correct, 8);
  for (const Grid grid : kEvaluationGrids) {
    const std::vector<Numbers> results =
        run_grid<Numbers>(whole, grid.tp, grid.pp, evaluate, grid.dp);
    for (int rank = 0; rank < grid.tp * grid.pp * grid.dp; ++rank) {
      const Numbers& got = results[static_cast<std::size_t>(rank)];
      EXPECT_NEAR(got.loss, expected.loss, 1e-6 * expected.loss)
          << grid.tp << "×" << grid.pp << "×" << grid.dp << " rank " << rank;
      EXPECT_EQ(got.correct, expected.correct)
          << grid.tp << "×" << grid.pp << "×" << grid.dp << " rank " << rank;
      if (grid.tp * grid.pp == 1) {  // replicas change only the order of the double sums
        EXPECT_NEAR(got.loss, expected.loss, 1e-13 * expected.loss) << grid.dp << " replicas";
      }
    }
  }
}

TEST(ParallelInference, GatherVocabJoinsTheShardsInRankOrder) {
  const InferenceModel whole = whole_model();
  const auto gathered = run_grid<std::vector<float>>(whole, 2, 1, [](const InferenceModel& m) {
    // 2 rows of 3 local columns: value = 100·row + global column.
    std::vector<float> local;
    for (int row = 0; row < 2; ++row) {
      for (int col = 0; col < 3; ++col) {
        local.push_back(static_cast<float>(100 * row + 3 * m.comms.tp_rank + col));
      }
    }
    return m.comms.gather_vocab(local, 2);
  });
  const std::vector<float> expected{0, 1, 2, 3, 4, 5, 100, 101, 102, 103, 104, 105};
  EXPECT_EQ(gathered[0], expected);
  EXPECT_EQ(gathered[1], expected);
}

// What a run on a device exchanges on the host (the scores shared from the head, the replica
// sums, the vocab gather, the sampled tokens) passes through the staged groups of
// inference_groups unchanged: every grid gives the host groups' results bit for bit.
TEST(ParallelInference, GroupsMadeForADeviceGiveTheHostGroupsResultsBitForBit) {
  constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};
  const InferenceModel whole = whole_model();
  const WikitextData wikitext = toy_wikitext();
  const std::vector<LambadaExample> examples = toy_lambada(whole);
  GenerationOptions greedy;
  greedy.sampling.greedy = true;
  greedy.seq_length = 16;
  greedy.out_seq_length = 8;
  greedy.eod = 63;
  greedy.vocab_size = 60;
  const std::vector<GenerationRow> rows{{{5, 9, 2}, 0}, {{1, 2, 3, 4}, 1}};
  struct Outcome {
    Numbers numbers;
    std::vector<std::vector<std::int64_t>> tokens;
    std::vector<float> logits;
  };
  const auto run = [&](const InferenceModel& m) {
    Outcome o{
        {evaluate_wikitext(m, wikitext, 63, 5).total_loss, evaluate_lambada(m, examples).correct},
        {},
        {}};
    const GptInference inference(m.options, *m.table, *m.params, m.comms);
    if (m.comms.dp_size == 1) {
      for (const GenerationResult& result : generate(inference, rows, greedy)) {
        o.tokens.push_back(result.tokens);
      }
    }
    o.logits = inference.full_logits(examples[3].context);
    return o;
  };
  for (const Grid grid : {Grid{2, 2}, Grid{2, 1, 2}, Grid{1, 2, 2}}) {
    const std::vector<Outcome> host = run_grid<Outcome>(whole, grid.tp, grid.pp, run, grid.dp);
    const std::vector<Outcome> staged =
        run_grid<Outcome>(whole, grid.tp, grid.pp, run, grid.dp, kCuda0);
    for (std::size_t rank = 0; rank < host.size(); ++rank) {
      const std::string where = std::to_string(grid.tp) + "×" + std::to_string(grid.pp) + "×" +
                                std::to_string(grid.dp) + " rank " + std::to_string(rank);
      EXPECT_EQ(staged[rank].numbers.loss, host[rank].numbers.loss) << where;
      EXPECT_EQ(staged[rank].numbers.correct, host[rank].numbers.correct) << where;
      EXPECT_EQ(staged[rank].tokens, host[rank].tokens) << where;
      EXPECT_EQ(staged[rank].logits, host[rank].logits) << where;
    }
    EXPECT_GT(host[0].numbers.loss, 0.0);
  }
}

// Which communicators a grid's groups are (tasks::inference_groups): the host's own on the host,
// each wrapped for device tensors on a CUDA device (staged through them with gloo; with nccl too
// for groups of one rank, where nothing crosses ranks), absent groups absent.
TEST(InferenceGroups, TheHostKeepsItsGroupsAndADeviceWrapsEach) {
  constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};
  const auto one_rank_groups = [] {
    auto mail = std::make_shared<test::Mailboxes>();
    dist::GridCommunicators groups;
    groups.tp = std::make_unique<test::ThreadCommunicator>("tp", mail, 0, 1);
    groups.dp = std::make_unique<test::ThreadCommunicator>("dp", mail, 0, 1);
    groups.pp = std::make_unique<test::ThreadCommunicator>("pp", mail, 0, 1);
    groups.mp = std::make_unique<test::ThreadCommunicator>("mp", mail, 0, 1);
    return groups;
  };
  dist::GridCommunicators host = one_rank_groups();
  const dist::Communicator* tp = host.tp.get();
  const dist::GridCommunicators kept =
      inference_groups(std::move(host), tensor::Device{}, dist::DeviceBackend::kNccl, 10.0);
  EXPECT_EQ(kept.tp.get(), tp);
  EXPECT_NE(dynamic_cast<const test::ThreadCommunicator*>(kept.dp.get()), nullptr);
  for (const dist::DeviceBackend backend :
       {dist::DeviceBackend::kHostStaged, dist::DeviceBackend::kNccl}) {
    const dist::GridCommunicators wrapped =
        inference_groups(one_rank_groups(), kCuda0, backend, 10.0);
    for (const dist::GroupKind kind : {dist::GroupKind::kTensor, dist::GroupKind::kData,
                                       dist::GroupKind::kPipeline, dist::GroupKind::kModel}) {
      EXPECT_NE(dynamic_cast<const dist::HostStagedCommunicator*>(wrapped.get(kind)), nullptr)
          << dist::group_name(kind);
    }
    EXPECT_EQ(wrapped.embedding, nullptr);
  }
}

TEST(ParallelInference, AModelOnAnotherGridThanItsCommsIsRefused) {
  const InferenceModel whole = whole_model();
  InferenceComms two_stages;
  two_stages.pp_size = 2;
  EXPECT_THROW(GptInference(whole.options, *whole.table, *whole.params, two_stages), base::Error);
}

}  // namespace
}  // namespace mds::tasks
