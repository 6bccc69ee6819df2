// The 16-bit wrappers and ZeRO with several ranks on a CUDA device, in one process: the ranks of a
// D × P grid run on threads, each with its own DeviceContext on cuda:0, over in-process host
// groups wrapped in HostStagedCommunicator (the --distributed-backend gloo path), against the same
// grid on the host (plain in-process groups). BF16_Optimizer at D = 2 and at T = 2 × D = 2 (its
// master partitioned over DP, the gradients all-reduced in bf16, the norm summed over TP), fp16
// ZeRO 1 at D = 2 with a loss scale that overflows, and fp16 ZeRO 2 at D = 2 × P = 2 (the tied word
// embedding reduced over the embedding group from partitions cut differently on the two stages;
// the overflow flag and norms over the P group).
//
// Both sides do the same arithmetic (tests/gpu/training_mixed_precision_test.cpp explains the
// bounds): the collectives are the same rank-order folds, only the model's own rounding differs.
// Losses within 1e-3 relative, the skipped steps and loss scales identical, final weights within
// 5e-3 (‖Δ‖/‖w‖); on each side the data-parallel replicas end bit-identical, and so do the two
// stages' copies of the tied embedding. Expected from the arithmetic, not observed: this test has
// never run on a GPU. Its logic was checked with host contexts on both sides.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dist/host_staged_communicator.h"
#include "model/init.h"
#include "model/pipeline_partition.h"
#include "model/tp_merge.h"
#include "ops/elementwise.h"
#include "tests/gpu/tiny_gpt_training.h"
#include "tests/unit/thread_communicator.h"
#include "train/loss_scaler.h"
#include "train/pipeline_executor.h"
#include "train/pipeline_schedule.h"

namespace mds {
namespace {

using gpu_test::Batch;
using gpu_test::kCuda0;
using gpu_test::kLr;
using gpu_test::kMicroBatches;
using gpu_test::relative_difference;
using gpu_test::tiny_options;
using model::GptModel;
using model::ModelOptions;
using model::ParamBuffer;
using model::ParamTable;
using tensor::DType;
using tensor::Tensor;

constexpr std::int64_t kIterations = 16;

struct GridSpec {
  int data_parallel = 2;
  int stages = 1;  // P
  int tensor_parallel = 1;
  train::OptimizerOptions optimizer;
  int model_parallel() const { return stages * tensor_parallel; }
};

// What one rank saw per iteration, and its weights (fp32) at the end.
struct RankTrace {
  std::vector<double> losses;
  std::vector<bool> skipped;
  std::vector<double> scales;
  std::vector<float> weights, word_embedding;
  std::int64_t skips() const { return std::count(skipped.begin(), skipped.end(), true); }
};

// Rank (d · P + k) · T + t is TP rank t of stage k of replica d.
using GridTrace = std::vector<RankTrace>;

std::vector<float> as_floats(Tensor t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  ops::cast(Tensor(out.data(), DType::kFloat32, tensor::Shape{t.numel()}),
            t.reshape(tensor::Shape{t.numel()}));
  return out;
}

// Runs body(rank) on one thread per rank; an exception fails the test naming the rank.
void on_threads(int ranks, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
}

// One group's mailboxes per instance of it (index: the replica, stage or TP rank it belongs to).
std::vector<std::shared_ptr<test::Mailboxes>> mailboxes(int count) {
  std::vector<std::shared_ptr<test::Mailboxes>> out;
  for (int i = 0; i < count; ++i) out.push_back(std::make_shared<test::Mailboxes>());
  return out;
}

// Every group of a grid: dp per (stage, TP rank), tp per (replica, stage), mp (DeepSpeed's P × T
// group) per replica, pp and the embedding group per (replica, TP rank).
struct GridMail {
  explicit GridMail(const GridSpec& spec)
      : dp(mailboxes(spec.model_parallel())),
        tp(mailboxes(spec.data_parallel * spec.stages)),
        mp(mailboxes(spec.data_parallel)),
        pp(mailboxes(spec.data_parallel * spec.tensor_parallel)),
        embedding(mailboxes(spec.data_parallel * spec.tensor_parallel)) {}
  std::vector<std::shared_ptr<test::Mailboxes>> dp, tp, mp, pp, embedding;
};

// One rank of the grid: the Trainer's loop (training_dropout's micro-batch numbering, the
// pipeline executor with the optimizer's accumulation and ReduceTiedGrads for P > 1).
class GridRank {
 public:
  GridRank(const GridSpec& spec, int rank, const ParamBuffer& whole, bool device)
      : spec_(spec),
        d_(rank / spec.model_parallel()),
        k_(rank / spec.tensor_parallel % spec.stages),
        t_(rank % spec.tensor_parallel),
        options_(stage_options(spec, k_, t_)),
        table_(ParamTable::build(options_.config)),
        ctx_(device ? ops::DeviceContext(kCuda0) : ops::DeviceContext()),
        device_(device),
        start_(table_, DType::kFloat32) {
    model::split_tp_shard(whole, spec.tensor_parallel, start_);
  }

  RankTrace train(const GridMail& mail) {
    const int p = spec_.stages, t = spec_.tensor_parallel, mp_size = spec_.model_parallel();
    const auto at = [](const std::vector<std::shared_ptr<test::Mailboxes>>& boxes, int index) {
      return boxes[static_cast<std::size_t>(index)];
    };
    const auto dp = group("dp", at(mail.dp, k_ * t + t_), d_, spec_.data_parallel);
    const auto tp = t > 1 ? group("tp", at(mail.tp, d_ * p + k_), t_, t) : nullptr;
    const auto mp = mp_size > 1 ? group("mp", at(mail.mp, d_), k_ * t + t_, mp_size) : nullptr;
    const auto pp = p > 1 ? group("pp", at(mail.pp, d_ * t + t_), k_, p) : nullptr;
    const auto embedding =
        p > 1 ? group("embedding", at(mail.embedding, d_ * t + t_), k_, p) : nullptr;
    GptModel model(options_, table_, tp.get(),
                   p > 1 ? static_cast<int>(train::num_pipe_buffers(kMicroBatches, p, k_)) : 1,
                   &ctx_);
    train::MixedPrecisionOptimizer optimizer(table_, spec_.optimizer, dp.get(), mp.get(), &ctx_);
    optimizer.initialize(start_.flat(), kLr);
    std::optional<train::PipelineExecutor> executor;
    if (p > 1) executor.emplace(model, pp.get(), embedding.get());
    const std::size_t word =
        table_.index_of(model::GptConfig::kEmbeddingSpec, "word_embeddings.weight");
    // As the trainer: with overlap_reduction the tied gradient's DP all-reduce follows
    // ReduceTiedGrads.
    const bool overlap = optimizer.overlaps_reduction();
    if (p > 1) optimizer.reduce_after_tied_gradient(word);
    RankTrace trace;
    for (std::int64_t it = 0; it < kIterations; ++it) {
      const auto scale =
          static_cast<float>(optimizer.loss_scale() / static_cast<double>(kMicroBatches));
      const auto dropout = [&](std::int64_t mb) {
        model::DropoutContext c;
        c.seed = 77;
        c.iteration = static_cast<std::uint64_t>(it);
        c.micro_batch = static_cast<std::uint64_t>(mb * spec_.data_parallel + d_);
        return c;
      };
      std::optional<Batch> batch;
      const auto load = [&](std::int64_t mb) {
        batch.emplace(options_, it, mb * spec_.data_parallel + d_);
        return batch->view(options_);
      };
      double loss = 0.0;
      if (executor) {
        train::PipelineStepInput input;
        input.micro_batches = kMicroBatches;
        input.load = load;
        input.dropout = dropout;
        input.loss_scale = scale;
        if (overlap) {
          input.backward_ready = [&](std::int64_t mb) -> model::GradientsReady {
            if (!optimizer.wants_gradients_ready(mb + 1 == kMicroBatches)) return {};
            return [&](std::span<const std::size_t> params) { optimizer.gradients_ready(params); };
          };
        }
        input.after_backward = [&](std::int64_t mb) {
          optimizer.accumulate_micro_batch(overlap && mb + 1 == kMicroBatches);
        };
        input.reduce_tied_grads = [&](dist::Communicator& tied) {
          optimizer.reduce_tied_gradient(word, tied);
        };
        loss = executor->train_step(optimizer.compute(), optimizer.micro_grads(), input);
      } else {
        for (std::int64_t mb = 0; mb < kMicroBatches; ++mb) {
          // As the trainer: with overlap_reduction, the last micro-batch's gradients are reduced
          // as its backward finishes them.
          const bool last = mb + 1 == kMicroBatches;
          model::GradientsReady ready;
          if (optimizer.wants_gradients_ready(last)) {
            ready = [&](std::span<const std::size_t> params) { optimizer.gradients_ready(params); };
          }
          loss +=
              model.forward_backward(optimizer.compute(), optimizer.micro_grads(), load(mb),
                                     dropout(mb), scale, model::GradientWrite::kOverwrite, ready);
          optimizer.accumulate_micro_batch(last);
        }
      }
      const train::StepResult step = optimizer.step(kLr, it + 1);
      trace.losses.push_back(loss / static_cast<double>(kMicroBatches));
      trace.skipped.push_back(step.skipped);
      trace.scales.push_back(step.loss_scale);
    }
    if (device_) {
      EXPECT_EQ(optimizer.device(), kCuda0);
    }
    optimizer.copy_state_to_host();
    trace.weights = as_floats(optimizer.params().flat());
    trace.word_embedding = as_floats(optimizer.params().view(word));
    return trace;
  }

 private:
  static ModelOptions stage_options(const GridSpec& spec, int stage, int tp_rank) {
    ModelOptions o = tiny_options();
    o.config.tensor_parallel_size = spec.tensor_parallel;
    o.config.tp_rank = tp_rank;
    if (spec.stages > 1) {
      model::set_stage_specs(
          o.config, model::pipeline_partition(o.config, false, spec.stages, "uniform"), stage);
    }
    return o;
  }

  std::unique_ptr<dist::Communicator> group(const char* name,
                                            const std::shared_ptr<test::Mailboxes>& mail, int rank,
                                            int size) const {
    auto host = std::make_unique<test::ThreadCommunicator>(name, mail, rank, size);
    if (!device_) return host;
    return std::make_unique<dist::HostStagedCommunicator>(std::move(host));
  }

  GridSpec spec_;
  int d_, k_, t_;
  ModelOptions options_;
  ParamTable table_;
  ops::DeviceContext ctx_;
  bool device_;
  ParamBuffer start_;
};

GridTrace train_grid(const GridSpec& spec, const ParamBuffer& whole, bool device) {
  const int ranks = spec.data_parallel * spec.model_parallel();
  const GridMail mail(spec);
  GridTrace traces(static_cast<std::size_t>(ranks));
  on_threads(ranks, [&](int r) {
    GridRank rank(spec, r, whole, device);
    traces[static_cast<std::size_t>(r)] = rank.train(mail);
  });
  return traces;
}

train::DynamicLossScaleArgs overflowing_scaler() {
  // 2^20: the first steps' scaled fp16 gradients overflow (anything above 65504 / 2^20 ≈ 0.06
  // becomes inf), so steps are skipped while the scale halves; a window of 4 lets it grow back
  // and overflow again.
  train::DynamicLossScaleArgs args;
  args.init_scale = 1048576.0;
  args.scale_window = 4;
  return args;
}

train::OptimizerOptions bf16_adam() {
  train::OptimizerOptions o = gpu_test::fp32_adam();
  o.precision = train::Precision::kBf16;
  o.communication_dtype = DType::kBFloat16;  // DeepSpeed's default for bf16
  return o;
}

train::OptimizerOptions fp16_zero(int stage) {
  train::OptimizerOptions o = gpu_test::fp32_adam();
  o.precision = train::Precision::kFp16;
  o.communication_dtype = DType::kFloat16;
  o.zero_stage = stage;
  o.loss_scaler =
      train::LossScaler::dynamic(train::LossScaleRule::kDynamicZero, overflowing_scaler());
  return o;
}

class GridMixedPrecisionOnDevice : public ::testing::Test {
 protected:
  GridMixedPrecisionOnDevice()
      : table_(ParamTable::build(tiny_options().config)), initial_(table_, DType::kFloat32) {
    model::initialize_parameters(initial_, 1234);
  }

  // The device grid against the host grid; returns the host's traces.
  GridTrace expect_device_follows_host(const GridSpec& spec) {
    const GridTrace want = train_grid(spec, initial_, false);
    const GridTrace got = train_grid(spec, initial_, true);
    for (std::size_t r = 0; r < want.size(); ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_EQ(got[r].skipped, want[r].skipped);
      EXPECT_EQ(got[r].scales, want[r].scales);
      EXPECT_EQ(got[r].losses.size(), want[r].losses.size());
      if (got[r].losses.size() != want[r].losses.size()) continue;
      for (std::size_t it = 0; it < want[r].losses.size(); ++it) {
        EXPECT_NEAR(got[r].losses[it], want[r].losses[it], 1e-3 * std::fabs(want[r].losses[it]))
            << "iteration " << it;
      }
      EXPECT_EQ(got[r].weights.size(), want[r].weights.size());
      if (got[r].weights.size() != want[r].weights.size()) continue;
      EXPECT_LE(relative_difference(got[r].weights, want[r].weights), 5e-3);
    }
    for (const GridTrace* side : {&want, &got}) expect_consistent(spec, *side);
    return want;
  }

  // Within one side: the data-parallel replicas of a stage end bit-identical, and so do the first
  // and the last stage's copies of the tied word embedding.
  static void expect_consistent(const GridSpec& spec, const GridTrace& traces) {
    const auto at = [&](int d, int k, int t) -> const RankTrace& {
      return traces[static_cast<std::size_t>((d * spec.stages + k) * spec.tensor_parallel + t)];
    };
    for (int d = 0; d < spec.data_parallel; ++d) {
      for (int t = 0; t < spec.tensor_parallel; ++t) {
        for (int k = 0; k < spec.stages; ++k) {
          EXPECT_EQ(at(d, k, t).weights, at(0, k, t).weights)
              << "replica " << d << " stage " << k << " TP rank " << t;
        }
        if (spec.stages > 1) {
          EXPECT_EQ(at(d, spec.stages - 1, t).word_embedding, at(d, 0, t).word_embedding)
              << "replica " << d << " TP rank " << t;
        }
      }
    }
  }

  ParamTable table_;
  ParamBuffer initial_;
};

TEST_F(GridMixedPrecisionOnDevice, Bf16WithTwoDataParallelRanks) {
  expect_device_follows_host({2, 1, 1, bf16_adam()});
}

// overlap_comm on the device (reductions started during the backward, staged in the micro-batch
// gradients' bytes): the bits of the step's own reduction on every rank; bf16 at stage 0 with
// P = 1 and 2 (the tied gradient's after ReduceTiedGrads), fp16 at stage 1 (all-reduced whole)
// and at stage 2 with P = 2 (every micro-batch's pieces reduced to their owners).
TEST_F(GridMixedPrecisionOnDevice, OverlappedReductionGivesTheStepsBits) {
  for (const GridSpec& base : {GridSpec{2, 1, 1, bf16_adam()}, GridSpec{2, 2, 1, bf16_adam()},
                               GridSpec{2, 1, 1, fp16_zero(1)}, GridSpec{2, 2, 1, fp16_zero(2)}}) {
    GridSpec spec = base;
    const GridTrace plain = train_grid(spec, initial_, true);
    spec.optimizer.overlap_reduction = true;
    const GridTrace overlapped = train_grid(spec, initial_, true);
    ASSERT_EQ(overlapped.size(), plain.size());
    for (std::size_t r = 0; r < plain.size(); ++r) {
      const std::string name = "P " + std::to_string(spec.stages) + " stage " +
                               std::to_string(spec.optimizer.zero_stage) + " rank " +
                               std::to_string(r);
      EXPECT_EQ(overlapped[r].losses, plain[r].losses) << name;
      EXPECT_EQ(overlapped[r].weights, plain[r].weights) << name;
      EXPECT_EQ(overlapped[r].skipped, plain[r].skipped) << name;
    }
  }
}

TEST_F(GridMixedPrecisionOnDevice, Bf16WithTwoTensorParallelAndTwoDataParallelRanks) {
  expect_device_follows_host({2, 1, 2, bf16_adam()});
}

TEST_F(GridMixedPrecisionOnDevice, Fp16ZeroOneWithTwoDataParallelRanksSkipsAsTheHost) {
  const GridTrace host = expect_device_follows_host({2, 1, 1, fp16_zero(1)});
  EXPECT_GT(host[0].skips(), 0);                // the scale overflowed at least once
  EXPECT_LT(host[0].skips(), kIterations / 2);  // and most steps trained
}

TEST_F(GridMixedPrecisionOnDevice, Fp16ZeroTwoWithTwoDataParallelRanksAndTwoStages) {
  const GridTrace host = expect_device_follows_host({2, 2, 1, fp16_zero(2)});
  EXPECT_GT(host[0].skips(), 0);
  EXPECT_LT(host[0].skips(), kIterations / 2);
}

}  // namespace
}  // namespace mds
