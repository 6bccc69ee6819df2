// The optimizer's memory plan and its chunked collectives, on D = 1, 2 and 3 ranks on threads:
//   - every precision × ZeRO stage gives the same bits (weights, masters, moments, norms, loss
//     scales, skipped steps, stage 2's ReduceTiedGrads) with collectives cut into chunks of a
//     few elements as with the default chunk, which moves every flat group of this table whole;
//   - memory() reports exactly the buffers plan_optimizer_memory() predicts;
//   - bf16 and fp16 without the fp32 compute copy (a model with 16-bit activations) give the same
//     bits, their memory() is their plan, and that plan is 4 bytes per table element smaller.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "model/gpt_config.h"
#include "model/param_table.h"
#include "thread_communicator.h"
#include "train/mixed_precision_optimizer.h"
#include "train/optimizer_memory.h"

namespace mds::train {

void PrintTo(const BufferBytes& buffer, std::ostream* os) {
  *os << buffer.name << ": " << buffer.bytes;
}

namespace {

using tensor::DType;

// Odd sizes so that groups need padding and parameters straddle partitions and chunks.
const model::ParamTable& odd_table() {
  static const model::ParamTable table = [] {
    model::GptConfig c;
    c.num_layers = 2;
    c.hidden_size = 12;
    c.num_attention_heads = 2;
    c.ffn_hidden_size = 20;
    c.seq_length = 5;
    c.max_position_embeddings = 5;
    c.padded_vocab_size = 37;
    return model::ParamTable::build(c);
  }();
  return table;
}

struct Layout {
  Precision precision;
  int zero_stage;
  DType comm;
  bool compute_copy = true;  // OptimizerOptions::fp32_compute_copy
};

std::string name_of(const Layout& layout, int ranks, std::int64_t chunk) {
  return std::string(to_string(layout.precision)) + " stage " + std::to_string(layout.zero_stage) +
         " comm " + std::string(tensor::dtype_name(layout.comm)) + " D " + std::to_string(ranks) +
         " chunk " + std::to_string(chunk) + (layout.compute_copy ? "" : " without compute copy");
}

std::vector<Layout> layouts() {
  return {{Precision::kFp32, 0, DType::kFloat32}, {Precision::kFp32, 0, DType::kFloat16},
          {Precision::kFp32, 1, DType::kFloat32}, {Precision::kFp32, 1, DType::kBFloat16},
          {Precision::kFp32, 2, DType::kFloat16}, {Precision::kBf16, 0, DType::kBFloat16},
          {Precision::kBf16, 0, DType::kFloat32}, {Precision::kFp16, 0, DType::kFloat16},
          {Precision::kFp16, 1, DType::kFloat16}, {Precision::kFp16, 1, DType::kFloat32},
          {Precision::kFp16, 2, DType::kFloat16}};
}

OptimizerOptions options_for(const Layout& layout, std::int64_t chunk) {
  OptimizerOptions o;
  o.precision = layout.precision;
  o.zero_stage = layout.zero_stage;
  o.communication_dtype = layout.comm;
  o.gradient_clipping = 0.05;
  o.adam.weight_decay = 0.1;
  o.collective_chunk_numel = chunk;
  o.fp32_compute_copy = layout.compute_copy;
  if (layout.precision == Precision::kFp16) {
    DynamicLossScaleArgs args;
    args.init_scale = 1024;
    args.scale_window = 2;
    o.loss_scaler = LossScaler::dynamic(
        layout.zero_stage == 0 ? LossScaleRule::kDynamicFp16Opt : LossScaleRule::kDynamicZero,
        args);
  }
  return o;
}

std::vector<std::byte> bytes_of(const tensor::Tensor& t) {
  std::vector<std::byte> out(t.bytes());
  std::memcpy(out.data(), t.raw(), out.size());
  return out;
}

// What one rank ends with.
struct Outcome {
  std::vector<std::byte> params, master, exp_avg, exp_avg_sq;
  std::vector<StepResult> steps;
  std::vector<BufferBytes> memory;
};

// Three iterations of two micro-batches on DP rank `rank`: gradients that differ per rank,
// micro-batch and iteration, an fp16 overflow in iteration 2, and at stage 2 (`reduce_tied`) a
// ReduceTiedGrads of the word embedding over a one-rank embedding group.
Outcome train(const Layout& layout, std::int64_t chunk, dist::Communicator* dp, int rank,
              bool reduce_tied) {
  const model::ParamTable& table = odd_table();
  MixedPrecisionOptimizer opt(table, options_for(layout, chunk), dp);
  std::vector<float> initial(static_cast<std::size_t>(table.buffer_numel()));
  for (std::size_t i = 0; i < initial.size(); ++i) initial[i] = 0.05f * std::sin(0.37f * i);
  opt.initialize(
      tensor::Tensor(initial.data(), DType::kFloat32, tensor::Shape{table.buffer_numel()}), 1e-3);
  test::ThreadCommunicator embedding("embedding", std::make_shared<test::Mailboxes>(), 0, 1);
  const std::size_t word = table.index_of(1, "word_embeddings.weight");
  Outcome out;
  for (int it = 1; it <= 3; ++it) {
    for (int micro = 0; micro < 2; ++micro) {
      float* g = opt.micro_grads().flat().data<float>();
      for (const model::ParamSpec& p : table.params()) {
        for (std::int64_t k = 0; k < p.local_numel(); ++k) {
          g[p.offset + k] = static_cast<float>(
              opt.loss_scale() * 0.01 *
              std::sin(0.91 * (p.offset + k) + 1.7 * rank + 0.43 * micro + 2.9 * it));
        }
      }
      if (layout.precision == Precision::kFp16 && it == 2 && micro == 1) g[0] = 1e30f;
      opt.accumulate_micro_batch();
    }
    if (reduce_tied && layout.zero_stage == 2) opt.reduce_tied_gradient(word, embedding);
    out.steps.push_back(opt.step(1e-3 * it, it));
  }
  out.params = bytes_of(opt.params().flat());
  out.master = bytes_of(opt.master());
  out.exp_avg = bytes_of(opt.exp_avg());
  out.exp_avg_sq = bytes_of(opt.exp_avg_sq());
  out.memory = opt.memory();
  return out;
}

// Every rank's outcome, each rank on its own thread over one data-parallel group (none for one
// rank), with one OpenMP thread: several teams spinning against each other slow the test 10×.
std::vector<Outcome> train_on_ranks(const Layout& layout, std::int64_t chunk, int ranks,
                                    bool reduce_tied = true) {
  std::vector<Outcome> outcomes(static_cast<std::size_t>(ranks));
  auto mail = std::make_shared<test::Mailboxes>();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      omp_set_num_threads(1);
      try {
        test::ThreadCommunicator dp("dp", mail, r, ranks);
        outcomes[static_cast<std::size_t>(r)] =
            train(layout, chunk, ranks > 1 ? &dp : nullptr, r, reduce_tied);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return outcomes;
}

TEST(OptimizerChunking, TinyChunksGiveTheBitsOfWholeGroups) {
  bool any_skipped = false, any_clipped = false;
  for (const Layout& layout : layouts()) {
    for (const int ranks : {1, 2, 3}) {
      const std::vector<Outcome> whole = train_on_ranks(layout, kDefaultCollectiveChunk, ranks);
      for (const std::int64_t chunk : {2, 7, 30}) {
        const std::string name = name_of(layout, ranks, chunk);
        const std::vector<Outcome> chunked = train_on_ranks(layout, chunk, ranks);
        for (std::size_t r = 0; r < whole.size(); ++r) {
          const Outcome& a = chunked[r];
          const Outcome& b = whole[r];
          EXPECT_EQ(a.params, b.params) << name << " rank " << r;
          EXPECT_EQ(a.master, b.master) << name << " rank " << r;
          EXPECT_EQ(a.exp_avg, b.exp_avg) << name << " rank " << r;
          EXPECT_EQ(a.exp_avg_sq, b.exp_avg_sq) << name << " rank " << r;
          ASSERT_EQ(a.steps.size(), b.steps.size());
          for (std::size_t s = 0; s < a.steps.size(); ++s) {
            EXPECT_EQ(a.steps[s].skipped, b.steps[s].skipped) << name << " step " << s;
            EXPECT_EQ(a.steps[s].grad_norm, b.steps[s].grad_norm) << name << " step " << s;
            EXPECT_EQ(a.steps[s].loss_scale, b.steps[s].loss_scale) << name << " step " << s;
            EXPECT_EQ(a.steps[s].clipped, b.steps[s].clipped) << name << " step " << s;
            any_skipped = any_skipped || b.steps[s].skipped;
            any_clipped = any_clipped || b.steps[s].clipped;
          }
        }
      }
    }
  }
  EXPECT_TRUE(any_skipped);
  EXPECT_TRUE(any_clipped);
}

TEST(OptimizerChunking, MemoryIsThePlan) {
  for (const Layout& layout : layouts()) {
    for (const int ranks : {1, 2, 3}) {
      for (const std::int64_t chunk : {std::int64_t{6}, kDefaultCollectiveChunk}) {
        const OptimizerOptions options = options_for(layout, chunk);
        const std::vector<BufferBytes> plan = plan_optimizer_memory(odd_table(), ranks, options);
        // Stage 2's ReduceTiedGrads may grow the staging beyond a step's needs: not planned.
        for (const Outcome& outcome : train_on_ranks(layout, chunk, ranks, false)) {
          EXPECT_EQ(outcome.memory, plan) << name_of(layout, ranks, chunk);
        }
      }
    }
  }
}

TEST(OptimizerChunking, WithoutComputeCopySameBitsAndItsOwnPlan) {
  for (Layout layout : layouts()) {
    if (layout.precision == Precision::kFp32) continue;
    for (const int ranks : {1, 2}) {
      const std::vector<Outcome> with_copy = train_on_ranks(layout, 7, ranks, false);
      layout.compute_copy = false;
      const std::string name = name_of(layout, ranks, 7);
      const std::vector<Outcome> without = train_on_ranks(layout, 7, ranks, false);
      const std::vector<BufferBytes> plan =
          plan_optimizer_memory(odd_table(), ranks, options_for(layout, 7));
      for (std::size_t r = 0; r < without.size(); ++r) {
        EXPECT_EQ(without[r].params, with_copy[r].params) << name << " rank " << r;
        EXPECT_EQ(without[r].master, with_copy[r].master) << name << " rank " << r;
        EXPECT_EQ(without[r].exp_avg, with_copy[r].exp_avg) << name << " rank " << r;
        EXPECT_EQ(without[r].exp_avg_sq, with_copy[r].exp_avg_sq) << name << " rank " << r;
        EXPECT_EQ(without[r].memory, plan) << name << " rank " << r;
        EXPECT_EQ(total_bytes(with_copy[r].memory) - total_bytes(plan),
                  static_cast<std::size_t>(odd_table().buffer_numel()) * sizeof(float))
            << name;
      }
      layout.compute_copy = true;
    }
  }
}

}  // namespace
}  // namespace mds::train
