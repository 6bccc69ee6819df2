// OpenBLAS sgemm GFLOP/s at the GEMM shapes of one GPT-2 training micro-batch (as the CPU ops call
// them: row-major, the same transposes and leading dimensions) and at a large square size, the
// "peak" the training step is compared with.
//
// Besides one row per shape it prints the sgemm-bound time of a whole training step: every GEMM the
// step runs (forward, and backward's input and weight gradients, for all layers, heads and
// micro-batches) at the rate measured for its shape. A step cannot be faster than that with this
// BLAS; the gap between it and pretrain's step time is what is spent outside sgemm.
//
// Usage: sgemm_peak --layers L --hidden H --heads N --seq S --micro-batch B --global-batch G
//                   [--vocab V] [--square N] [--seconds T]
// Threads: OpenBLAS reads OPENBLAS_NUM_THREADS (or OMP_NUM_THREADS) at start. Kernels: those the
// CPU backend's GEMMs use (ops/cpu/openblas_kernels.h), printed with the family OpenBLAS loaded.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "config/flags.h"
#include "ops/cpu/openblas_kernels.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::int64_t layers = 0, hidden = 0, heads = 0, seq = 0, micro_batch = 0, global_batch = 0;
  std::int64_t vocab = 50304, square = 2048;
  double seconds = 0.5;  // per shape
};

// One sgemm call shape. Leading dimensions are those of the ops (strided attention views in qkv).
struct Gemm {
  std::string name;
  bool trans_a, trans_b;
  std::int64_t m, n, k;
  std::int64_t lda, ldb, ldc;
  double calls_per_step;  // how often a training step runs it
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * k; }
};

Options parse(int argc, char** argv) {
  Options o;
  mds::config::FlagSet flags("sgemm_peak",
                             "OpenBLAS sgemm GFLOP/s at the GEMM shapes of one GPT-2 training "
                             "micro-batch and at a large square size.");
  CLI::App& app = flags.app();
  const auto positive = [&](const char* name, std::int64_t& value, const char* help) {
    return app.add_option(name, value, help)->check(CLI::PositiveNumber);
  };
  positive("--layers", o.layers, "transformer layers")->required();
  positive("--hidden", o.hidden, "hidden size")->required();
  positive("--heads", o.heads, "attention heads")->required();
  positive("--seq", o.seq, "sequence length")->required();
  positive("--micro-batch", o.micro_batch, "micro-batch size")->required();
  positive("--global-batch", o.global_batch, "global batch size")->required();
  positive("--vocab", o.vocab, "(padded) vocabulary size");
  positive("--square", o.square, "size of the square reference GEMM");
  app.add_option("--seconds", o.seconds, "timing per shape")->check(CLI::PositiveNumber);
  flags.parse(argc, argv);
  if (o.hidden % o.heads != 0 || o.global_batch % o.micro_batch != 0) {
    std::fprintf(stderr,
                 "sgemm_peak: error: --heads must divide --hidden and --micro-batch must divide "
                 "--global-batch\n");
    std::exit(2);
  }
  return o;
}

// A linear layer out[M, N] = x[M, K]·W[N, K]ᵀ and its two backward GEMMs (ops/cpu/matmul.cpp).
void add_linear(std::vector<Gemm>& gemms, const std::string& name, std::int64_t m, std::int64_t n,
                std::int64_t k, double per_step) {
  gemms.push_back({name + " fwd", false, true, m, n, k, k, k, n, per_step});
  gemms.push_back({name + " dx", false, false, m, k, n, n, k, k, per_step});
  gemms.push_back({name + " dW", true, false, n, k, m, n, k, k, per_step});
}

std::vector<Gemm> model_gemms(const Options& o) {
  const std::int64_t h = o.hidden, s = o.seq, b = o.micro_batch, hn = o.hidden / o.heads;
  const std::int64_t tokens = s * b;
  const double micro = static_cast<double>(o.global_batch / o.micro_batch);
  const double layers = static_cast<double>(o.layers) * micro;
  const double heads = layers * static_cast<double>(b * o.heads);
  std::vector<Gemm> g;
  add_linear(g, "qkv", tokens, 3 * h, h, layers);
  add_linear(g, "dense", tokens, h, h, layers);
  add_linear(g, "fc1", tokens, 4 * h, h, layers);
  add_linear(g, "fc2", tokens, h, 4 * h, layers);
  add_linear(g, "logits", tokens, o.vocab, h, micro);
  // Attention per (batch, head) with q, k, v strided in qkv rows (ops/cpu/attention.cpp).
  const std::int64_t qkv_ld = b * o.heads * 3 * hn, ctx_ld = b * h;
  g.push_back({"attn scores q·kᵀ", false, true, s, s, hn, qkv_ld, qkv_ld, s, heads});
  g.push_back({"attn context p·v", false, false, s, hn, s, s, qkv_ld, ctx_ld, heads});
  g.push_back({"attn dprobs dctx·vᵀ", false, true, s, s, hn, ctx_ld, qkv_ld, s, heads});
  g.push_back({"attn dv pᵀ·dctx", true, false, s, hn, s, s, ctx_ld, qkv_ld, heads});
  g.push_back({"attn dq dS·k", false, false, s, hn, s, s, qkv_ld, qkv_ld, heads});
  g.push_back({"attn dk dSᵀ·q", true, false, s, hn, s, s, qkv_ld, qkv_ld, heads});
  return g;
}

std::vector<float> random_floats(std::int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Best GFLOP/s of repeated calls over about `seconds` (after one warm-up call).
double measure(const Gemm& g, double seconds, std::mt19937& rng) {
  const std::int64_t a_rows = g.trans_a ? g.k : g.m, b_rows = g.trans_b ? g.n : g.k;
  const std::vector<float> a = random_floats(a_rows * g.lda, rng);
  const std::vector<float> b = random_floats(b_rows * g.ldb, rng);
  std::vector<float> c(static_cast<std::size_t>(g.m * g.ldc), 0.0f);
  const auto call = [&] {
    cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                g.trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(g.m),
                static_cast<blasint>(g.n), static_cast<blasint>(g.k), 1.0f, a.data(),
                static_cast<blasint>(g.lda), b.data(), static_cast<blasint>(g.ldb), 1.0f, c.data(),
                static_cast<blasint>(g.ldc));
  };
  call();
  double best = 0.0;
  const auto begin = Clock::now();
  int calls = 0;
  while (calls < 3 || std::chrono::duration<double>(Clock::now() - begin).count() < seconds) {
    const auto start = Clock::now();
    call();
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, g.flops() / t / 1e9);
    ++calls;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::mt19937 rng(1234);
  const auto& kernels = mds::ops::cpu::openblas_kernel_choice();
  std::printf("OpenBLAS %s, %d threads (%s), %s kernels (loaded with %s)\n", openblas_get_config(),
              openblas_get_num_threads(), openblas_get_parallel() == 0 ? "sequential" : "threaded",
              kernels.used.c_str(), kernels.loaded.c_str());
  const Gemm square{"square", false,    false,    o.square, o.square,
                    o.square, o.square, o.square, o.square, 0};
  const double peak = measure(square, o.seconds * 4, rng);
  std::printf("| GEMM | trans | M×N×K | calls/step | GFLOP/s | of peak |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  std::printf("| square (peak) | NN | %lld³ | - | %.1f | 100%% |\n",
              static_cast<long long>(o.square), peak);
  double step_flops = 0.0, step_seconds = 0.0;
  for (const Gemm& g : model_gemms(o)) {
    const double rate = measure(g, o.seconds, rng);
    step_flops += g.flops() * g.calls_per_step;
    step_seconds += g.flops() * g.calls_per_step / (rate * 1e9);
    std::printf("| %s | %c%c | %lld×%lld×%lld | %.0f | %.1f | %.0f%% |\n", g.name.c_str(),
                g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N', static_cast<long long>(g.m),
                static_cast<long long>(g.n), static_cast<long long>(g.k), g.calls_per_step, rate,
                100.0 * rate / peak);
  }
  std::printf("PEAK gflops=%.2f\n", peak);
  std::printf("STEP gemm_gflop=%.3f gemm_bound_s=%.4f gemm_gflops=%.2f\n", step_flops / 1e9,
              step_seconds, step_flops / step_seconds / 1e9);
  return 0;
}
