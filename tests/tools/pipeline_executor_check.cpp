// Under mpirun with T·P ranks (D = 1): each rank runs its stage of a tiny GPT through
// PipelineExecutor::train_step and compares the loss and every gradient with the whole model run
// locally (same TP rank, same micro-batches, same dropout masks) on the same rank, then the
// loss of one eval step (InferenceSchedule) against the whole model's forward_loss.
//   pipeline_executor_check TP METHOD MICRO_BATCHES CHECKPOINT_LAYERS(0 = off)
// Also checks the bytes the pp and embedding groups sent in the train step against the formula.
// Prints one line per rank and exits 1 on any mismatch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../unit/random_micro_batch.h"
#include "base/error.h"
#include "dist/grid_communicators.h"
#include "dist/launch.h"
#include "dist/mpi_communicator.h"
#include "dist/process_grid.h"
#include "model/gpt_model.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/pipeline_partition.h"
#include "train/pipeline_executor.h"
#include "train/pipeline_schedule.h"

namespace {

using mds::model::DropoutContext;
using mds::model::GptModel;
using mds::model::MicroBatch;
using mds::model::ModelOptions;
using mds::model::ParamBuffer;
using mds::model::ParamSpec;
using mds::model::ParamTable;
using mds::tensor::DType;
using mds::tensor::Shape;
using mds::tensor::Tensor;

ModelOptions tiny_options(int tp, int tp_rank, int checkpoint_layers) {
  ModelOptions o;
  o.config.num_layers = 4;
  o.config.hidden_size = 32;
  o.config.num_attention_heads = 4;
  o.config.seq_length = 16;
  o.config.max_position_embeddings = 16;
  o.config.padded_vocab_size = 128;
  o.config.tensor_parallel_size = tp;
  o.config.tp_rank = tp_rank;
  o.micro_batch_size = 2;
  o.hidden_dropout = 0.1f;
  o.attention_dropout = 0.1f;
  o.checkpoint_activations = checkpoint_layers > 0;
  o.checkpoint_num_layers = checkpoint_layers > 0 ? checkpoint_layers : 1;
  return o;
}

// Holes in the loss mask at i mod 7 == 2.
struct BatchData : mds::test::RandomMicroBatch {
  BatchData(const ModelOptions& o, std::uint32_t seed) : RandomMicroBatch(o, seed, 7, 2) {}
};

DropoutContext dropout_for(std::int64_t mb) {
  return DropoutContext{99, 3, static_cast<std::uint64_t>(mb), true};
}

// Replicated parameters get the same values on every TP rank, split ones this rank's own.
void randomize(const ParamTable& table, const ParamBuffer& params, int tp_rank) {
  for (std::size_t p = 0; p < table.size(); ++p) {
    const bool split = table[p].split != mds::model::TpSplit::kReplicated;
    std::mt19937 gen(static_cast<std::uint32_t>(1000 + p + (split ? 7919 * tp_rank : 0)));
    const bool ones = table[p].init == mds::model::InitKind::kOnes;
    std::uniform_real_distribution<float> dist(ones ? 0.7f : -0.2f, ones ? 1.3f : 0.2f);
    for (float& x : params.view(p).host_span<float>()) x = dist(gen);
  }
}

struct Checker {
  long checks = 0, failures = 0;
  std::string where;
  void near(double got, double want, double tolerance, const std::string& what) {
    ++checks;
    if (std::fabs(got - want) <= tolerance) return;
    if (++failures <= 10) {
      std::fprintf(stderr, "pipeline_executor_check: %s: %s = %.9g, whole model %.9g\n",
                   where.c_str(), what.c_str(), got, want);
    }
  }
};

int run(int argc, char** argv) {
  if (argc != 5) {
    mds::base::fail("usage: pipeline_executor_check TP METHOD MICRO_BATCHES CHECKPOINT_LAYERS");
  }
  const int tp = std::atoi(argv[1]);
  const std::string method = argv[2];
  const std::int64_t micro_batches = std::atoll(argv[3]);
  const int checkpoint_layers = std::atoi(argv[4]);

  mds::dist::MpiSession session;
  const double timeout = mds::dist::timeout_seconds_from_env(mds::dist::process_env(), 120);
  Checker check;
  double loss = 0.0;
  {
    std::unique_ptr<mds::dist::MpiCommunicator> world = mds::dist::MpiCommunicator::world(timeout);
    if (tp < 1 || world->size() % tp != 0) mds::base::fail("TP ", tp, " does not divide the world");
    const mds::dist::ProcessGrid grid(world->size(), tp, world->size() / tp);
    const mds::dist::GridCommunicators comms = mds::dist::make_grid_communicators(*world, grid);
    const mds::dist::GridCoord coord = grid.coord_of(world->rank());
    const ModelOptions whole = tiny_options(tp, coord.tp, checkpoint_layers);
    std::vector<BatchData> batches;
    for (std::int64_t mb = 0; mb < micro_batches; ++mb) {
      batches.emplace_back(whole, 500 + static_cast<std::uint32_t>(mb));
    }
    const float loss_scale = 1.0f / static_cast<float>(micro_batches);

    // The whole model on this rank (over its TP group): the expected loss and gradients.
    const ParamTable whole_table = ParamTable::build(whole.config);
    ParamBuffer whole_params(whole_table, DType::kFloat32),
        whole_grads(whole_table, DType::kFloat32);
    randomize(whole_table, whole_params, coord.tp);
    double expected_loss = 0.0, expected_eval = 0.0;
    const auto no_dropout = [](std::int64_t) { return DropoutContext{99, 3, 0, false}; };
    {
      GptModel model(whole, whole_table, comms.tp.get());
      for (std::int64_t mb = 0; mb < micro_batches; ++mb) {
        expected_loss += model.forward_backward(whole_params, whole_grads,
                                                batches[static_cast<std::size_t>(mb)].view(),
                                                dropout_for(mb), loss_scale);
      }
      for (std::int64_t mb = 0; mb < micro_batches; ++mb) {
        expected_eval += model.forward_loss(
            whole_params, batches[static_cast<std::size_t>(mb)].view(), no_dropout(mb));
      }
    }

    // This rank's stage, with the same parameter values.
    const std::int64_t stages = grid.pp_size();
    ModelOptions options = whole;
    mds::model::set_stage_specs(options.config,
                                mds::model::pipeline_partition(whole.config, false, stages, method),
                                coord.pp);
    const ParamTable table = ParamTable::build(options.config);
    ParamBuffer params(table, DType::kFloat32), grads(table, DType::kFloat32);
    for (std::size_t p = 0; p < table.size(); ++p) {
      const auto from =
          whole_params.view(whole_table.index_of(table[p].layer, table[p].name)).host_span<float>();
      std::copy(from.begin(), from.end(), params.view(p).host_span<float>().begin());
    }
    const auto buffers =
        static_cast<int>(mds::train::num_pipe_buffers(micro_batches, stages, coord.pp));
    GptModel model(options, table, comms.tp.get(), buffers);
    mds::train::PipelineExecutor executor(model, comms.pp.get(), comms.embedding.get());
    mds::train::PipelineStepInput input;
    input.micro_batches = micro_batches;
    std::int64_t next_load = 0;
    input.load = [&](std::int64_t mb) {
      if (mb != next_load++) mds::base::fail("micro-batch ", mb, " loaded out of order");
      return batches[static_cast<std::size_t>(mb)].view();
    };
    input.dropout = dropout_for;
    input.loss_scale = loss_scale;
    std::int64_t backwards = 0;
    input.after_backward = [&](std::int64_t) { ++backwards; };
    if (comms.pp) comms.pp->reset_stats();
    if (comms.embedding) comms.embedding->reset_stats();
    loss = executor.train_step(params, grads, input);
    const mds::dist::CommStats pp_stats = comms.pp ? comms.pp->stats() : mds::dist::CommStats{};
    const mds::dist::CommStats tied_stats =
        comms.embedding ? comms.embedding->stats() : mds::dist::CommStats{};
    const std::int64_t train_loads = next_load;
    next_load = 0;
    input.dropout = no_dropout;
    const double eval_loss = executor.eval_step(params, input);

    check.where = "rank " + std::to_string(world->rank()) + " (stage " + std::to_string(coord.pp) +
                  ", tp " + std::to_string(coord.tp) + ", specs [" +
                  std::to_string(options.config.stage_first_spec) + ", " +
                  std::to_string(options.config.stage_end()) + "))";
    check.near(loss, expected_loss, 1e-6 * std::fabs(expected_loss), "loss");
    check.near(static_cast<double>(backwards), static_cast<double>(micro_batches), 0, "backwards");
    const bool loads = coord.pp == 0 || coord.pp == stages - 1;
    check.near(eval_loss, expected_eval, 1e-6 * std::fabs(expected_eval), "eval loss");
    check.near(static_cast<double>(train_loads), loads ? static_cast<double>(micro_batches) : 0.0,
               0, "loads");
    // Bytes of one train step, counted by the communicators: every stage but the last sends M
    // activations [s, b, h] fp32, every stage but the first M gradients of that size, the last
    // stage broadcasts the loss (8 bytes to each other stage); the first and last stage
    // all-reduce the word embedding's gradient, 2·(n−1)/n of it with n = 2.
    using mds::dist::CommOp;
    const auto hidden_bytes = static_cast<std::uint64_t>(
        whole.config.seq_length * whole.micro_batch_size * whole.config.hidden_size * 4);
    const auto m = static_cast<std::uint64_t>(micro_batches);
    const bool first = coord.pp == 0, last = coord.pp == stages - 1;
    check.near(static_cast<double>(pp_stats.bytes(CommOp::kSend)),
               static_cast<double>((first ? 0 : m) * hidden_bytes + (last ? 0 : m) * hidden_bytes),
               0, "pp send bytes");
    check.near(static_cast<double>(pp_stats.bytes(CommOp::kBroadcast)),
               last && stages > 1 ? 8.0 * static_cast<double>(stages - 1) : 0.0, 0,
               "pp broadcast bytes");
    const std::optional<std::size_t> word = table.find(1, "word_embeddings.weight");
    const std::uint64_t word_bytes =
        word ? static_cast<std::uint64_t>(table[*word].local_numel()) * 4 : 0;
    const bool tied = stages > 1 && (first || last);
    check.near(static_cast<double>(tied_stats.bytes(CommOp::kAllReduce)),
               tied ? static_cast<double>(word_bytes) : 0.0, 0, "embedding all-reduce bytes");
    for (std::size_t p = 0; p < table.size(); ++p) {
      const ParamSpec& spec = table[p];
      const auto got = grads.view(p).host_span<float>();
      // After ReduceTiedGrads both copies of the word embedding hold the whole model's gradient;
      // the last stage's position-embedding replica is never used.
      const bool unused = spec.tied_replica && spec.name != "word_embeddings.weight";
      const auto want =
          whole_grads.view(whole_table.index_of(spec.layer, spec.name)).host_span<float>();
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double expected = unused ? 0.0 : want[i];
        check.near(got[i], expected, 1e-5 + 1e-5 * std::fabs(expected),
                   spec.engine_name() + "[" + std::to_string(i) + "]");
      }
    }
  }
  std::printf("pipeline_executor_check: %s loss %.6f, %ld checks, %ld failed\n",
              check.where.c_str(), loss, check.checks, check.failures);
  return check.failures > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_executor_check: %s\n", e.what());
    return 1;
  }
}
