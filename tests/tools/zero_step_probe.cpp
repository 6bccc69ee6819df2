// zero_step_probe: the optimizer across data-parallel ranks under mpirun, for
// tests/e2e/zero_mpi_test.sh. For every precision × ZeRO stage it runs four steps of two
// micro-batches on D ranks and checks, on every rank:
//   - the weights equal a single-process optimizer fed all D·2 micro-batches (each × 1/D, as the
//     trainer's loss scaling does), within a bound per precision, and are bit-identical on every
//     rank;
//   - the bytes each group sent equal the theoretical volume: stage 0 all-reduces the whole
//     gradient, BF16_Optimizer and ZeRO all-gather the partitions (D−1)·ps, ZeRO reduce-scatters
//     (D−1)·ps per reduction (stage 1 once a step, stage 2 once a micro-batch);
//   - the fp32 master and Adam state a rank allocates is 12·Ψ/D bytes within 5% (ZeRO paper,
//     K = 12) when partitioned;
//   - with collectives cut into chunks of a few elements (OptimizerOptions::
//     collective_chunk_numel) the weights, masters and Adam moments are bit-identical to the
//     default chunk's (which moves these groups whole), and the bytes sent are the same.
// Prints "zero_step_probe: D ranks, N checks, F failed" and exits 1 on a failure.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "dist/launch.h"
#include "dist/mpi_communicator.h"
#include "model/gpt_config.h"
#include "model/param_table.h"
#include "train/mixed_precision_optimizer.h"

namespace {

using mds::dist::CommOp;
using mds::tensor::DType;
using mds::train::MixedPrecisionOptimizer;
using mds::train::OptimizerOptions;
using mds::train::Precision;

struct Checker {
  int rank = 0;
  std::int64_t checks = 0;
  std::int64_t failures = 0;
  void expect(bool ok, const std::string& what) {
    ++checks;
    if (ok) return;
    ++failures;
    std::fprintf(stderr, "rank %d: FAIL: %s\n", rank, what.c_str());
  }
};

// Odd sizes so that groups need padding and parameters straddle partitions.
mds::model::ParamTable probe_table() {
  mds::model::GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 12;
  c.num_attention_heads = 2;
  c.ffn_hidden_size = 20;
  c.seq_length = 5;
  c.max_position_embeddings = 5;
  c.padded_vocab_size = 37;
  return mds::model::ParamTable::build(c);
}

// Gradient of micro-batch `micro` of DP rank `rank` at `iteration`: a few binary digits only, so
// that sums and the × 1/D (D a power of two) are exact in every precision. Positive, so that no
// element sums to zero: Adam turns a rounding residue of a zero gradient into a full step.
float gradient(int rank, int micro, int iteration, std::int64_t i) {
  const std::int64_t h = (i * 7919 + rank * 104729 + micro * 1299709 + iteration * 15485863) % 61;
  return static_cast<float>(h + 1) / 64.0f;
}

struct Case {
  Precision precision;
  int stage;
  std::string name() const {
    return std::string(mds::train::to_string(precision)) + " stage " + std::to_string(stage);
  }
};

OptimizerOptions options_for(const Case& c, std::int64_t chunk) {
  OptimizerOptions o;
  o.collective_chunk_numel = chunk;
  o.precision = c.precision;
  o.zero_stage = c.stage;
  o.gradient_clipping = 1.0;
  o.adam.weight_decay = 0.1;
  o.communication_dtype = c.precision == Precision::kBf16   ? DType::kBFloat16
                          : c.precision == Precision::kFp16 ? DType::kFloat16
                                                            : DType::kFloat32;
  if (c.precision == Precision::kFp16) {
    o.loss_scaler = mds::train::LossScaler::static_scale(1.0);
  }
  return o;
}

constexpr int kMicroBatches = 2;
constexpr int kIterations = 4;

void initialize(MixedPrecisionOptimizer& opt, const mds::model::ParamTable& table) {
  std::vector<float> initial(static_cast<std::size_t>(table.buffer_numel()));
  for (std::size_t i = 0; i < initial.size(); ++i) {
    initial[i] = 0.05f * std::sin(0.37f * static_cast<float>(i));
  }
  opt.initialize(mds::tensor::Tensor(initial.data(), DType::kFloat32,
                                     mds::tensor::Shape{table.buffer_numel()}),
                 1e-3);
}

void add_gradient(MixedPrecisionOptimizer& opt, int rank, int micro, int iteration, float scale) {
  float* g = opt.micro_grads().flat().data<float>();
  const mds::model::ParamTable& table = opt.table();
  for (const mds::model::ParamSpec& p : table.params()) {
    for (std::int64_t k = 0; k < p.local_numel(); ++k) {
      g[p.offset + k] = scale * gradient(rank, micro, iteration, p.offset + k);
    }
  }
}

double max_relative_difference(const MixedPrecisionOptimizer& a, const MixedPrecisionOptimizer& b) {
  const float* x = a.compute().flat().data<float>();
  const float* y = b.compute().flat().data<float>();
  double worst = 0.0;
  for (std::int64_t i = 0; i < a.table().buffer_numel(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]) /
                                std::max(1e-3, std::fabs(static_cast<double>(y[i]))));
  }
  return worst;
}

std::uint64_t checksum(const mds::tensor::Tensor& flat, std::uint64_t h = 1469598103934665603ull) {
  const auto* bytes = static_cast<const unsigned char*>(flat.raw());
  for (std::size_t i = 0; i < flat.bytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

std::uint64_t checksum(const MixedPrecisionOptimizer& opt) {
  return checksum(opt.params().flat());
}

// The weights, the master and both moments.
std::uint64_t state_checksum(const MixedPrecisionOptimizer& opt) {
  std::uint64_t h = checksum(opt.params().flat());
  for (const mds::tensor::Tensor& t : {opt.master(), opt.exp_avg(), opt.exp_avg_sq()}) {
    h = checksum(t, h);
  }
  return h;
}

// The micro-batches of this rank in `iteration`, then the step.
mds::train::StepResult train_iteration(MixedPrecisionOptimizer& opt, int rank, int iteration) {
  for (int micro = 0; micro < kMicroBatches; ++micro) {
    add_gradient(opt, rank, micro, iteration, 1.0f);
    opt.accumulate_micro_batch();
  }
  return opt.step(1e-3 * iteration, iteration);
}

// Bytes an all_reduce of n elements of size s sends from group rank r (docs/parallelism.md).
std::uint64_t all_reduce_bytes(std::int64_t n, int ranks, int rank, std::size_t s) {
  const std::int64_t own = mds::dist::all_reduce_chunk(n, ranks, rank).count;
  return static_cast<std::uint64_t>((n - own) + (ranks - 1) * own) * s;
}

void run_case(const Case& c, mds::dist::MpiCommunicator& dp, Checker& check) {
  const mds::model::ParamTable table = probe_table();
  const int d = dp.size();
  const OptimizerOptions options = options_for(c, mds::train::kDefaultCollectiveChunk);
  MixedPrecisionOptimizer parallel(table, options, &dp, nullptr);
  MixedPrecisionOptimizer serial(table, options);
  initialize(parallel, table);
  initialize(serial, table);
  dp.reset_stats();
  for (int it = 1; it <= kIterations; ++it) {
    const auto got = train_iteration(parallel, dp.rank(), it);
    for (int micro = 0; micro < kMicroBatches; ++micro) {
      for (int r = 0; r < d; ++r) {
        add_gradient(serial, r, micro, it, 1.0f / static_cast<float>(d));
        serial.accumulate_micro_batch();
      }
    }
    const auto want = serial.step(1e-3 * it, it);
    check.expect(got.skipped == want.skipped, c.name() + ": skipped differs");
    // With D not a power of two the 1/D rounds, in the communication dtype for 16-bit runs.
    const double norm_bound = c.precision == Precision::kFp32 ? 1e-5 : 1e-3;
    if (got.grad_norm && want.grad_norm) {
      check.expect(std::fabs(*got.grad_norm - *want.grad_norm) <= norm_bound * *want.grad_norm,
                   c.name() + ": grad norm " + std::to_string(*got.grad_norm) + " vs " +
                       std::to_string(*want.grad_norm));
    }
  }
  const mds::dist::CommStats stats = dp.stats();  // the steps' traffic only
  // 16-bit weights may round a last-bit differently when the summation order changed the fp32
  // masters by an ulp; fp32 follows the serial run to its rounding.
  const double bound = c.precision == Precision::kFp32 ? 1e-5 : 1e-2;
  const double diff = max_relative_difference(parallel, serial);
  check.expect(diff <= bound, c.name() + ": weights differ from one process by " +
                                  std::to_string(diff) + " (relative)");

  // Equal checksums on every rank: max(x) == x and max(~x) == ~x everywhere means min == max.
  const std::uint64_t sum = checksum(parallel);
  std::uint64_t low = sum, high = ~sum;
  dp.all_reduce(mds::tensor::Tensor(&low, DType::kInt64, mds::tensor::Shape{1}),
                mds::dist::ReduceOp::kMax);
  dp.all_reduce(mds::tensor::Tensor(&high, DType::kInt64, mds::tensor::Shape{1}),
                mds::dist::ReduceOp::kMax);
  check.expect(low == sum && high == ~sum, c.name() + ": weights differ between ranks");

  // Bytes per step, measured over all steps.
  const std::size_t param_size = mds::tensor::dtype_size(parallel.params().dtype());
  const std::size_t comm_size = mds::tensor::dtype_size(options.communication_dtype);
  std::uint64_t gather = 0, scatter = 0;
  if (parallel.partitioned()) {
    for (const mds::train::ZeroGroup& g : parallel.shard().layout().groups()) {
      gather += static_cast<std::uint64_t>((d - 1) * g.partition_numel) * param_size;
      scatter += static_cast<std::uint64_t>((d - 1) * g.partition_numel) * comm_size;
    }
  }
  const std::uint64_t steps = kIterations;
  check.expect(stats.bytes(CommOp::kAllGather) == steps * gather,
               c.name() + ": all_gather sent " + std::to_string(stats.bytes(CommOp::kAllGather)) +
                   " bytes, expected " + std::to_string(steps * gather));
  const std::uint64_t reductions = c.stage == 2 ? steps * kMicroBatches : c.stage == 1 ? steps : 0;
  check.expect(stats.bytes(CommOp::kReduceScatter) == reductions * scatter,
               c.name() + ": reduce_scatter sent " +
                   std::to_string(stats.bytes(CommOp::kReduceScatter)) + " bytes, expected " +
                   std::to_string(reductions * scatter));
  if (c.stage == 0 && d > 1) {
    // The whole gradient buffer in the communication dtype, nothing else.
    const std::uint64_t expected =
        steps * all_reduce_bytes(table.buffer_numel(), d, dp.rank(), comm_size);
    check.expect(stats.bytes(CommOp::kAllReduce) == expected,
                 c.name() + ": all_reduce sent " + std::to_string(stats.bytes(CommOp::kAllReduce)) +
                     " bytes, expected " + std::to_string(expected));
  }

  // Model-state memory: fp32 master + exp_avg + exp_avg_sq (K = 12 bytes per parameter).
  std::int64_t psi = 0;
  for (const mds::model::ParamSpec& p : table.params()) psi += p.local_numel();
  const bool partitioned = c.precision == Precision::kBf16 || c.stage >= 1;
  check.expect(parallel.partitioned() == partitioned, c.name() + ": partitioned()");
  if (partitioned) {
    const double held =
        4.0 * static_cast<double>(parallel.master().numel() + parallel.exp_avg().numel() +
                                  parallel.exp_avg_sq().numel());
    const double formula = 12.0 * static_cast<double>(psi) / d;
    check.expect(std::fabs(held - formula) <= 0.05 * formula,
                 c.name() + ": optimizer state " + std::to_string(held) + " bytes, formula " +
                     std::to_string(formula));
  }

  // The same steps with every collective cut into chunks of a few elements.
  MixedPrecisionOptimizer chunked(table, options_for(c, 6), &dp, nullptr);
  initialize(chunked, table);
  dp.reset_stats();
  for (int it = 1; it <= kIterations; ++it) train_iteration(chunked, dp.rank(), it);
  check.expect(state_checksum(chunked) == state_checksum(parallel),
               c.name() + ": chunked collectives change the weights or the Adam state");
  const mds::dist::CommStats chunked_stats = dp.stats();
  for (const CommOp op : {CommOp::kAllReduce, CommOp::kReduceScatter, CommOp::kAllGather}) {
    check.expect(chunked_stats.bytes(op) == stats.bytes(op),
                 c.name() + ": chunked collectives send " +
                     std::to_string(chunked_stats.bytes(op)) + " bytes, whole ones " +
                     std::to_string(stats.bytes(op)));
  }
}

}  // namespace

int main() {
  try {
    mds::dist::MpiSession session;
    const double timeout = mds::dist::timeout_seconds_from_env(mds::dist::process_env(), 300);
    Checker check;
    int ranks = 0;
    {
      std::unique_ptr<mds::dist::MpiCommunicator> world =
          mds::dist::MpiCommunicator::world(timeout);
      check.rank = world->rank();
      ranks = world->size();
      std::unique_ptr<mds::dist::MpiCommunicator> dp = world->split("dp", 0, world->rank());
      const Case cases[] = {{Precision::kFp32, 0}, {Precision::kFp32, 1}, {Precision::kFp32, 2},
                            {Precision::kFp16, 0}, {Precision::kFp16, 1}, {Precision::kFp16, 2},
                            {Precision::kBf16, 0}};
      for (const Case& c : cases) run_case(c, *dp, check);
    }
    if (check.rank == 0 || check.failures > 0) {
      std::printf("zero_step_probe: %d ranks, %lld checks, %lld failed\n", ranks,
                  static_cast<long long>(check.checks), static_cast<long long>(check.failures));
    }
    return check.failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zero_step_probe: %s\n", e.what());
    return 1;
  }
}
