// Tensor, pipeline and data parallelism on a CUDA device, in one process: the ranks run on
// threads, each with its own DeviceContext on cuda:0, over in-process host groups wrapped in
// HostStagedCommunicator (the --distributed-backend gloo path, which lets ranks share a GPU). T = 2
// and P = 2 against the whole model on the host from the same parameters: the micro-batch losses
// within 1e-5 relative, every parameter's gradient within 1e-4 (‖Δ‖/‖g‖). D = 2 with the fp32
// ZeRO-0 optimizer against the same two ranks on the host: losses within 1e-5, weights after three
// steps within 1e-4. The multi-process runs are tests/gpu/pretrain_device_grid_test.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../unit/random_micro_batch.h"
#include "../unit/thread_communicator.h"
#include "dist/host_staged_communicator.h"
#include "model/gpt_model.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/pipeline_partition.h"
#include "model/tp_merge.h"
#include "ops/device_context.h"
#include "tensor/device_memory.h"
#include "train/mixed_precision_optimizer.h"
#include "train/pipeline_executor.h"
#include "train/pipeline_schedule.h"

namespace mds {
namespace {

using model::DropoutContext;
using model::GptModel;
using model::ModelOptions;
using model::ParamBuffer;
using model::ParamTable;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};
constexpr std::int64_t kMicroBatches = 3;

ModelOptions tiny_options() {
  ModelOptions o;
  o.config.num_layers = 4;
  o.config.hidden_size = 32;
  o.config.num_attention_heads = 4;  // head dim 8, two heads per TP rank at T = 2
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

// The whole model on the host: parameters, the micro-batch losses and the summed gradients.
struct Whole {
  ParamTable table;
  ParamBuffer params, grads;
  std::vector<double> losses;
  std::vector<BatchData> batches;
  float loss_scale = 1.0f / static_cast<float>(kMicroBatches);

  explicit Whole(const ModelOptions& o)
      : table(ParamTable::build(o.config)),
        params(table, DType::kFloat32),
        grads(table, DType::kFloat32) {
    std::mt19937 gen(3);
    for (std::size_t p = 0; p < table.size(); ++p) {
      const bool ones = table[p].init == model::InitKind::kOnes;
      std::uniform_real_distribution<float> dist(ones ? 0.7f : -0.2f, ones ? 1.3f : 0.2f);
      for (float& x : params.view(p).host_span<float>()) x = dist(gen);
    }
    for (std::int64_t m = 0; m < kMicroBatches; ++m) {
      batches.emplace_back(o, 40 + static_cast<std::uint32_t>(m));
    }
    GptModel model(o, table);
    for (std::int64_t m = 0; m < kMicroBatches; ++m) {
      losses.push_back(model.forward_backward(
          params, grads, batches[static_cast<std::size_t>(m)].view(), dropout_for(m), loss_scale));
    }
  }
};

// A host copy of a device buffer.
ParamBuffer to_host(const ParamBuffer& device) {
  ParamBuffer host(device.table(), DType::kFloat32);
  tensor::copy(host.flat(), device.flat());
  return host;
}

// ‖got − want‖ / ‖want‖ of every parameter of `got`'s table within `bound`; `want` has the same
// table.
void expect_gradients_near(const ParamBuffer& got, const ParamBuffer& want, double bound,
                           const std::string& where) {
  for (std::size_t p = 0; p < got.table().size(); ++p) {
    const auto g = got.view(p).host_span<float>();
    const auto w = want.view(p).host_span<float>();
    double diff = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      ASSERT_TRUE(std::isfinite(g[i])) << where << " " << got.table()[p].engine_name();
      diff += (static_cast<double>(g[i]) - w[i]) * (static_cast<double>(g[i]) - w[i]);
      norm += static_cast<double>(w[i]) * w[i];
    }
    EXPECT_LE(std::sqrt(diff), bound * std::sqrt(norm) + 1e-12)
        << where << " " << got.table()[p].engine_name();
  }
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

std::unique_ptr<dist::Communicator> staged(const char* name,
                                           const std::shared_ptr<test::Mailboxes>& mail, int rank,
                                           int size) {
  return std::make_unique<dist::HostStagedCommunicator>(
      std::make_unique<test::ThreadCommunicator>(name, mail, rank, size));
}

TEST(GridOnDevice, TwoTensorParallelRanksOnOneGpuEqualTheHostModel) {
  const ModelOptions o = tiny_options();
  Whole whole(o);
  auto mail = std::make_shared<test::Mailboxes>();
  std::vector<std::vector<double>> losses(2);
  on_threads(2, [&](int r) {
    ModelOptions options = o;
    options.config.tensor_parallel_size = 2;
    options.config.tp_rank = r;
    const ParamTable table = ParamTable::build(options.config);
    ParamBuffer host_params(table, DType::kFloat32), want_grads(table, DType::kFloat32);
    model::split_tp_shard(whole.params, 2, host_params);
    model::split_tp_shard(whole.grads, 2, want_grads);
    ops::DeviceContext ctx(kCuda0);
    ParamBuffer params(table, DType::kFloat32, kCuda0), grads(table, DType::kFloat32, kCuda0);
    tensor::copy(params.flat(), host_params.flat());
    const std::unique_ptr<dist::Communicator> tp = staged("tp", mail, r, 2);
    GptModel model(options, table, tp.get(), 1, &ctx);
    for (std::int64_t m = 0; m < kMicroBatches; ++m) {
      losses[static_cast<std::size_t>(r)].push_back(
          model.forward_backward(params, grads, whole.batches[static_cast<std::size_t>(m)].view(),
                                 dropout_for(m), whole.loss_scale));
    }
    expect_gradients_near(to_host(grads), want_grads, 1e-4, "TP rank " + std::to_string(r));
  });
  for (std::size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(losses[r].size(), whole.losses.size());
    for (std::size_t m = 0; m < whole.losses.size(); ++m) {
      EXPECT_NEAR(losses[r][m], whole.losses[m], 1e-5 * std::fabs(whole.losses[m]))
          << "TP rank " << r << " micro-batch " << m;
    }
  }
}

TEST(GridOnDevice, TwoPipelineStagesOnOneGpuEqualTheHostModel) {
  const ModelOptions o = tiny_options();
  Whole whole(o);
  double whole_loss = 0.0;
  for (const double loss : whole.losses) whole_loss += loss;
  const std::vector<std::int64_t> parts = model::pipeline_partition(o.config, false, 2, "uniform");
  auto pp_mail = std::make_shared<test::Mailboxes>();
  auto embedding_mail = std::make_shared<test::Mailboxes>();
  std::vector<double> losses(2);
  on_threads(2, [&](int k) {
    ModelOptions options = o;
    model::set_stage_specs(options.config, parts, k);
    const ParamTable table = ParamTable::build(options.config);
    ParamBuffer host_params(table, DType::kFloat32), want_grads(table, DType::kFloat32);
    for (std::size_t p = 0; p < table.size(); ++p) {
      const std::size_t from = whole.table.index_of(table[p].layer, table[p].name);
      tensor::copy(host_params.view(p), whole.params.view(from));
      // The tied word embedding's gradient after ReduceTiedGrads is the whole model's on both
      // stages; the last stage's other replicas get none.
      if (!table[p].tied_replica || table[p].name == "word_embeddings.weight") {
        tensor::copy(want_grads.view(p), whole.grads.view(from));
      }
    }
    ops::DeviceContext ctx(kCuda0);
    ParamBuffer params(table, DType::kFloat32, kCuda0), grads(table, DType::kFloat32, kCuda0);
    tensor::copy(params.flat(), host_params.flat());
    GptModel model(options, table, nullptr,
                   static_cast<int>(train::num_pipe_buffers(kMicroBatches, 2, k)), &ctx);
    const std::unique_ptr<dist::Communicator> pp = staged("pp", pp_mail, k, 2);
    const std::unique_ptr<dist::Communicator> embedding = staged("embedding", embedding_mail, k, 2);
    train::PipelineExecutor executor(model, pp.get(), embedding.get());
    train::PipelineStepInput input;
    input.micro_batches = kMicroBatches;
    input.load = [&](std::int64_t mb) {
      return whole.batches[static_cast<std::size_t>(mb)].view();
    };
    input.dropout = dropout_for;
    input.loss_scale = whole.loss_scale;
    losses[static_cast<std::size_t>(k)] = executor.train_step(params, grads, input);
    expect_gradients_near(to_host(grads), want_grads, 1e-4, "stage " + std::to_string(k));
  });
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_NEAR(losses[k], whole_loss, 1e-5 * std::fabs(whole_loss)) << "stage " << k;
  }
}

// Three optimizer steps of two data-parallel ranks, rank r training on micro-batch r of each
// step, on cuda:0 (device) or the host: every rank's losses and its weights at the end.
struct DataParallelRun {
  std::vector<std::vector<double>> losses{2};
  std::vector<std::vector<float>> weights{2};
};

DataParallelRun train_data_parallel(const Whole& whole, const ModelOptions& o, bool device) {
  DataParallelRun run;
  auto mail = std::make_shared<test::Mailboxes>();
  on_threads(2, [&](int r) {
    ops::DeviceContext ctx = device ? ops::DeviceContext(kCuda0) : ops::DeviceContext();
    std::unique_ptr<dist::Communicator> dp =
        device ? staged("dp", mail, r, 2)
               : std::make_unique<test::ThreadCommunicator>("dp", mail, r, 2);
    GptModel model(o, whole.table, nullptr, 1, &ctx);
    train::OptimizerOptions adam;
    adam.gradient_clipping = 1.0;
    adam.adam.weight_decay = 0.1;
    train::MixedPrecisionOptimizer optimizer(whole.table, adam, dp.get(), nullptr, &ctx);
    optimizer.initialize(whole.params.flat(), 1e-3);
    for (std::int64_t it = 0; it < kMicroBatches; ++it) {
      BatchData batch(o, 100 + static_cast<std::uint32_t>(2 * it + r));
      DropoutContext dropout = dropout_for(2 * it + r);
      dropout.iteration = static_cast<std::uint64_t>(it);
      run.losses[static_cast<std::size_t>(r)].push_back(model.forward_backward(
          optimizer.compute(), optimizer.micro_grads(), batch.view(), dropout, 1.0f));
      optimizer.accumulate_micro_batch();
      optimizer.step(1e-3, it + 1);
    }
    optimizer.copy_state_to_host();
    const auto w = optimizer.params().flat().host_span<float>();
    run.weights[static_cast<std::size_t>(r)].assign(w.begin(), w.end());
  });
  return run;
}

TEST(GridOnDevice, TwoDataParallelRanksOnOneGpuTrainAsOnTheHost) {
  const ModelOptions o = tiny_options();
  const Whole whole(o);
  const DataParallelRun host = train_data_parallel(whole, o, false);
  const DataParallelRun gpu = train_data_parallel(whole, o, true);
  for (std::size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(gpu.losses[r].size(), host.losses[r].size());
    for (std::size_t it = 0; it < host.losses[r].size(); ++it) {
      EXPECT_NEAR(gpu.losses[r][it], host.losses[r][it], 1e-5 * std::fabs(host.losses[r][it]))
          << "rank " << r << " iteration " << it;
    }
    ASSERT_EQ(gpu.weights[r].size(), host.weights[r].size());
    double diff = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < host.weights[r].size(); ++i) {
      const double d = static_cast<double>(gpu.weights[r][i]) - host.weights[r][i];
      diff += d * d;
      norm += static_cast<double>(host.weights[r][i]) * host.weights[r][i];
    }
    EXPECT_LE(std::sqrt(diff), 1e-4 * std::sqrt(norm)) << "rank " << r;
  }
  // The data-parallel ranks hold one model.
  EXPECT_EQ(gpu.weights[0], gpu.weights[1]);
  EXPECT_EQ(host.weights[0], host.weights[1]);
}

}  // namespace
}  // namespace mds
