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
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
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

// A data-parallel group that counts the all-reduces and reduces started through it.
class CountingCommunicator final : public dist::Communicator {
 public:
  explicit CountingCommunicator(dist::Communicator& inner) : inner_(inner) {}
  std::int64_t reductions = 0;

  const std::string& name() const override { return inner_.name(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int world_rank(int group_rank) const override { return inner_.world_rank(group_rank); }
  dist::Request all_reduce_async(tensor::Tensor data, dist::ReduceOp op) override {
    ++reductions;
    return inner_.all_reduce_async(data, op);
  }
  dist::Request reduce_async(tensor::Tensor data, dist::ReduceOp op, int root) override {
    ++reductions;
    return inner_.reduce_async(data, op, root);
  }
  dist::Request reduce_scatter_async(tensor::Tensor input, tensor::Tensor output,
                                     dist::ReduceOp op) override {
    return inner_.reduce_scatter_async(input, output, op);
  }
  dist::Request all_gather_async(tensor::Tensor input, tensor::Tensor output) override {
    return inner_.all_gather_async(input, output);
  }
  dist::Request broadcast_async(tensor::Tensor data, int root) override {
    return inner_.broadcast_async(data, root);
  }
  dist::Request send_async(tensor::Tensor data, int peer, int tag) override {
    return inner_.send_async(data, peer, tag);
  }
  dist::Request recv_async(tensor::Tensor data, int peer, int tag) override {
    return inner_.recv_async(data, peer, tag);
  }
  dist::Request barrier_async() override { return inner_.barrier_async(); }
  const dist::CommStats& stats() const override { return inner_.stats(); }
  void reset_stats() override { inner_.reset_stats(); }

 private:
  dist::Communicator& inner_;
};

// The table's parameters in the order a backward finishes them: spec by spec from the last, in
// one report per spec.
std::vector<std::vector<std::size_t>> backward_reports(const model::ParamTable& table) {
  std::vector<std::vector<std::size_t>> reports;
  std::int64_t last_layer = -1;
  for (std::size_t p = table.size(); p-- > 0;) {
    if (reports.empty() || table[p].layer != last_layer) reports.emplace_back();
    reports.back().push_back(p);
    last_layer = table[p].layer;
  }
  return reports;
}

// Three iterations of two micro-batches on DP rank `rank`: gradients that differ per rank,
// micro-batch and iteration, an fp16 overflow in iteration 2, and (`reduce_tied`) a
// ReduceTiedGrads of the word embedding over a one-rank embedding group. With `overlap` the last
// micro-batch's gradients (stage 2: every micro-batch's) are reported final spec by spec
// (OptimizerOptions::overlap_reduction), the word embedding's reduction held for ReduceTiedGrads
// at stages 0 and 1, and `started_early` counts the reductions started before the
// accumulate_micro_batch() that follows.
Outcome train(const Layout& layout, std::int64_t chunk, dist::Communicator* dp, int rank,
              bool reduce_tied, bool overlap = false, std::int64_t* started_early = nullptr) {
  const model::ParamTable& table = odd_table();
  OptimizerOptions options = options_for(layout, chunk);
  options.overlap_reduction = overlap;
  std::optional<CountingCommunicator> counting;
  if (dp != nullptr) dp = &counting.emplace(*dp);
  MixedPrecisionOptimizer opt(table, options, dp);
  std::vector<float> initial(static_cast<std::size_t>(table.buffer_numel()));
  for (std::size_t i = 0; i < initial.size(); ++i) initial[i] = 0.05f * std::sin(0.37f * i);
  opt.initialize(
      tensor::Tensor(initial.data(), DType::kFloat32, tensor::Shape{table.buffer_numel()}), 1e-3);
  test::ThreadCommunicator embedding("embedding", std::make_shared<test::Mailboxes>(), 0, 1);
  const std::size_t word = table.index_of(1, "word_embeddings.weight");
  if (reduce_tied) opt.reduce_after_tied_gradient(word);
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
      const bool last = micro == 1;
      if (overlap && opt.wants_gradients_ready(last)) {
        const std::int64_t before = counting ? counting->reductions : 0;
        for (const std::vector<std::size_t>& report : backward_reports(table))
          opt.gradients_ready(report);
        if (started_early != nullptr && counting) *started_early += counting->reductions - before;
      }
      opt.accumulate_micro_batch(overlap && last);
    }
    if (reduce_tied) opt.reduce_tied_gradient(word, embedding);
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
                                    bool reduce_tied = true, bool overlap = false,
                                    std::vector<std::int64_t>* started_early = nullptr) {
  if (started_early != nullptr) started_early->assign(static_cast<std::size_t>(ranks), 0);
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
            train(layout, chunk, ranks > 1 ? &dp : nullptr, r, reduce_tied, overlap,
                  started_early ? &(*started_early)[static_cast<std::size_t>(r)] : nullptr);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return outcomes;
}

// Every rank's weights, state and step results equal, bit for bit.
void expect_same_outcomes(const std::vector<Outcome>& got, const std::vector<Outcome>& expected,
                          const std::string& name) {
  ASSERT_EQ(got.size(), expected.size()) << name;
  for (std::size_t r = 0; r < expected.size(); ++r) {
    const Outcome& a = got[r];
    const Outcome& b = expected[r];
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
    }
  }
}

TEST(OptimizerChunking, TinyChunksGiveTheBitsOfWholeGroups) {
  bool any_skipped = false, any_clipped = false;
  for (const Layout& layout : layouts()) {
    for (const int ranks : {1, 2, 3}) {
      const std::vector<Outcome> whole = train_on_ranks(layout, kDefaultCollectiveChunk, ranks);
      for (const std::int64_t chunk : {2, 7, 30}) {
        expect_same_outcomes(train_on_ranks(layout, chunk, ranks), whole,
                             name_of(layout, ranks, chunk));
      }
      for (const StepResult& step : whole.front().steps) {
        any_skipped = any_skipped || step.skipped;
        any_clipped = any_clipped || step.clipped;
      }
    }
  }
  EXPECT_TRUE(any_skipped);
  EXPECT_TRUE(any_clipped);
}

// overlap_reduction: reductions started as the last micro-batch's gradients are reported final
// give the bits of reducing them in step() (stage 1: of its reduce-scatter; stage 2: of every
// micro-batch's reduce-scatter). With several ranks they start before the accumulate (every
// parameter's piece holds a chunk of up to 64 elements); with the default chunk only stage 2's do
// (its buckets are at most a partition).
TEST(OptimizerChunking, OverlappedReductionGivesTheBitsOfTheStepsOwn) {
  for (const Layout& layout : layouts()) {
    for (const int ranks : {1, 2, 3}) {
      for (const std::int64_t chunk :
           {std::int64_t{2}, std::int64_t{30}, std::int64_t{200}, kDefaultCollectiveChunk}) {
        const std::string name = name_of(layout, ranks, chunk) + " overlapped";
        std::vector<std::int64_t> started_early;
        const std::vector<Outcome> overlapped =
            train_on_ranks(layout, chunk, ranks, true, true, &started_early);
        expect_same_outcomes(overlapped, train_on_ranks(layout, chunk, ranks), name);
        // Stage 2's buckets are at most a partition, which this table's are small.
        const bool early = ranks > 1 && (chunk <= 200 || layout.zero_stage == 2);
        for (const std::int64_t count : started_early) {
          if (early) {
            EXPECT_GT(count, 0) << name;
          } else {
            EXPECT_EQ(count, 0) << name;
          }
        }
      }
    }
  }
}

// Misuse gets one line naming it. (The default chunk holds this table whole, so nothing is
// started and the one thread of this rank never waits for the other's collectives.)
TEST(OptimizerChunking, OverlappedReductionMisuseIsAnError) {
  const model::ParamTable& table = odd_table();
  const std::vector<std::size_t> first_report = backward_reports(table).front();
  test::ThreadCommunicator embedding("embedding", std::make_shared<test::Mailboxes>(), 0, 1);
  const auto error_of = [&](const auto& misuse) -> std::string {
    test::ThreadCommunicator dp("dp", std::make_shared<test::Mailboxes>(), 0, 2);
    OptimizerOptions options =
        options_for({Precision::kFp32, 0, DType::kFloat32}, kDefaultCollectiveChunk);
    options.overlap_reduction = true;
    MixedPrecisionOptimizer opt(table, options, &dp);
    std::vector<float> initial(static_cast<std::size_t>(table.buffer_numel()), 0.5f);
    opt.initialize(
        tensor::Tensor(initial.data(), DType::kFloat32, tensor::Shape{table.buffer_numel()}), 1e-3);
    EXPECT_TRUE(opt.overlaps_reduction());
    opt.gradients_ready(first_report);
    try {
      misuse(opt);
    } catch (const base::Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of([](MixedPrecisionOptimizer& opt) { opt.accumulate_micro_batch(false); })
                .find("gradients_ready() was called during a micro-batch that is not the step's "
                      "last"),
            std::string::npos);
  EXPECT_NE(error_of([](MixedPrecisionOptimizer& opt) {
              opt.step(1e-3, 1);
            }).find("call accumulate_micro_batch(last = true) after the last backward"),
            std::string::npos);
  // A gradient's reduction released before the last accumulate, and one never held.
  EXPECT_NE(error_of([&](MixedPrecisionOptimizer& opt) {
              opt.reduce_tied_gradient(first_report.front(), embedding);
            }).find("which is not a held gradient accumulated by flush() and waiting"),
            std::string::npos);
  EXPECT_NE(error_of([&](MixedPrecisionOptimizer& opt) {
              opt.gradients_ready(first_report);
            }).find("was reported final twice in one backward"),
            std::string::npos);
}

TEST(OptimizerChunking, MemoryIsThePlan) {
  for (const Layout& layout : layouts()) {
    for (const int ranks : {1, 2, 3}) {
      for (const std::int64_t chunk : {std::int64_t{6}, kDefaultCollectiveChunk}) {
        // Stage 2's ReduceTiedGrads may grow the staging beyond a step's needs: not planned.
        // An overlapped reduction is staged in the micro-batch gradients (no staging of its own).
        for (const bool overlap : {false, true}) {
          OptimizerOptions options = options_for(layout, chunk);
          options.overlap_reduction = overlap;
          const std::vector<BufferBytes> plan = plan_optimizer_memory(odd_table(), ranks, options);
          for (const Outcome& outcome : train_on_ranks(layout, chunk, ranks, false, overlap)) {
            EXPECT_EQ(outcome.memory, plan)
                << name_of(layout, ranks, chunk) << (overlap ? " overlapped" : "");
          }
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
