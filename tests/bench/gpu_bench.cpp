// Kernel benchmark of kernels/ in the style of llm.c's dev/cuda: each kernel is first validated
// against its ops/cpu twin (at a reduced size, so that the CPU side stays quick), then timed at the
// shapes of one GPT-2 training micro-batch with CUDA events; one line per kernel with the time per
// call, the rate (GB/s for memory-bound kernels, TFLOP/s for the GEMMs and attention) and that
// rate as a share of the device's peak. `--only attention` times the fp32 flash attention and the
// bf16 one on its tensor-core and SIMT kernels.
//
// Peaks: memory bandwidth from the device attributes (2 · memory clock · bus width); FLOP/s from
// SM count · max clock · per-SM throughput for compute capabilities 8.0 (A100) and 9.0 (H100), the
// dense figures of NVIDIA's whitepapers (another capability prints no FLOP share). A rate over
// 100% of a FLOP peak means the max clock understates the boost, not a miracle.
//
// Usage: gpu_bench [--batch B] [--seq T] [--hidden C] [--heads H] [--vocab V] [--iters N]
//                  [--only NAME]
// Exit status: 0 when every validation passed, 1 otherwise, 77 without a CUDA device.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "config/flags.h"
#include "kernels/adam.h"
#include "kernels/attention.h"
#include "kernels/check.h"
#include "kernels/cross_entropy.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "kernels/gemm_gelu.h"
#include "kernels/layernorm.h"
#include "ops/cpu/adam.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/cross_entropy.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/embedding.h"
#include "ops/cpu/gelu.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/layernorm.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "tensor/tensor.h"

namespace {

using mds::kernels::check_cuda;
using mds::tensor::DType;

struct Options {
  std::int64_t batch = 8, seq = 1024, hidden = 768, heads = 12, vocab = 50304;
  int iters = 20;
  std::string only;
};

Options parse(int argc, char** argv) {
  Options o;
  mds::config::FlagSet flags("gpu_bench",
                             "Validates each CUDA kernel against its CPU twin at a reduced size, "
                             "then times it at the shapes of one GPT-2 micro-batch. Exits 77 "
                             "without a CUDA device.");
  CLI::App& app = flags.app();
  app.add_option("--batch", o.batch, "micro-batch size")->check(CLI::PositiveNumber);
  app.add_option("--seq", o.seq, "sequence length")->check(CLI::PositiveNumber);
  app.add_option("--hidden", o.hidden, "hidden size")->check(CLI::PositiveNumber);
  app.add_option("--heads", o.heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--vocab", o.vocab, "(padded) vocabulary size")->check(CLI::PositiveNumber);
  app.add_option("--iters", o.iters, "timed calls per kernel")->check(CLI::PositiveNumber);
  app.add_option(
      "--only", o.only,
      "only this kernel family: embedding, layernorm, attention, gemm, gelu, activations16, "
      "cross_entropy or adam");
  flags.parse(argc, argv);
  if (o.hidden % o.heads != 0) {
    std::fprintf(stderr, "gpu_bench: error: --heads must divide --hidden\n");
    std::exit(2);
  }
  return o;
}

struct Peak {
  double bytes_per_s = 0;   // memory bandwidth
  double fp32_flops = 0;    // CUDA cores, FMA = 2 FLOPs
  double tensor_flops = 0;  // bf16/fp16 tensor cores, dense
  std::string name;
};

Peak device_peak() {
  int device = 0, sms = 0, clock_khz = 0, mem_khz = 0, bus_bits = 0, major = 0, minor = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "attribute");
  check_cuda(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device), "attribute");
  check_cuda(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device), "attribute");
  check_cuda(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device),
             "attribute");
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
             "attribute");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
             "attribute");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  Peak p;
  p.name = prop.name;
  p.bytes_per_s = 2.0 * mem_khz * 1e3 * bus_bits / 8.0;
  const double sm_hz = static_cast<double>(sms) * clock_khz * 1e3;
  const int cc = major * 10 + minor;
  if (cc == 80) {  // A100: 64 FP32 lanes, 1024 dense bf16 FMA per SM per clock
    p.fp32_flops = sm_hz * 128;
    p.tensor_flops = sm_hz * 2048;
  } else if (cc == 90) {  // H100: 128 FP32 lanes, 2048 dense bf16 FMA per SM per clock
    p.fp32_flops = sm_hz * 256;
    p.tensor_flops = sm_hz * 4096;
  }
  std::printf("device: %s (sm_%d, %d SMs, %.0f MHz), peak %.0f GB/s", p.name.c_str(), cc, sms,
              clock_khz / 1e3, p.bytes_per_s / 1e9);
  if (p.fp32_flops > 0) {
    std::printf(", %.1f fp32 TFLOP/s, %.0f bf16 tensor TFLOP/s", p.fp32_flops / 1e12,
                p.tensor_flops / 1e12);
  }
  std::printf("\n");
  return p;
}

// A device buffer of n T's (no initialization unless given host values).
template <typename T>
class Buffer {
 public:
  explicit Buffer(std::size_t n) : n_(n) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, n == 0 ? 1 : n * sizeof(T)), "bench cudaMalloc");
    data_ = static_cast<T*>(p);
  }
  explicit Buffer(const std::vector<T>& host) : Buffer(host.size()) {
    check_cuda(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
               "bench upload");
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { cudaFree(data_); }
  T* get() const { return data_; }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    check_cuda(cudaDeviceSynchronize(), "bench synchronize");
    check_cuda(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost),
               "bench download");
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t n_;
};

std::vector<float> random_floats(std::int64_t n, std::uint32_t seed, float lo = -1.0f,
                                 float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<std::int64_t> random_ids(std::int64_t n, std::int64_t limit, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, limit - 1);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

double relative_error(const std::vector<float>& out, const std::vector<float>& ref) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    const double d = static_cast<double>(out[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Prints and returns whether the validation passed (NaN fails).
bool validate(const char* name, const std::vector<float>& out, const std::vector<float>& ref,
              double bound) {
  const double error = relative_error(out, ref);
  const bool ok = out.size() == ref.size() && error <= bound;
  std::printf("  validate %-28s rel err %.2e (bound %.0e) %s\n", name, error, bound,
              ok ? "ok" : "FAIL");
  return ok;
}

// Mean milliseconds per call of `launch` over `iters` calls after two warm-up calls.
double time_ms(const std::function<void()>& launch, int iters) {
  launch();
  launch();
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  check_cuda(cudaEventRecord(start, nullptr), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) launch();
  check_cuda(cudaEventRecord(stop, nullptr), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0.0f;
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iters;
}

// One result line: a memory-bound kernel reports bytes, a compute-bound one FLOPs (peak 0: no
// share printed).
void report_bytes(const char* name, double ms, double bytes, const Peak& peak) {
  const double rate = bytes / (ms * 1e-3);
  std::printf("%-34s %9.3f ms %9.1f GB/s  %5.1f%% of peak bandwidth\n", name, ms, rate / 1e9,
              100.0 * rate / peak.bytes_per_s);
}
void report_flops(const char* name, double ms, double flops, double peak_flops) {
  const double rate = flops / (ms * 1e-3);
  std::printf("%-34s %9.3f ms %9.2f TFLOP/s", name, ms, rate / 1e12);
  if (peak_flops > 0) std::printf("  %5.1f%% of peak", 100.0 * rate / peak_flops);
  std::printf("\n");
}

constexpr double kF = sizeof(float);

// Rows the CPU validations use: the full shape's columns, fewer rows.
std::int64_t validation_rows(std::int64_t rows) {
  return rows < 256 ? rows : 256;
}

bool bench_layernorm(const Options& o, const Peak& peak) {
  const std::int64_t cols = o.hidden, rows = o.batch * o.seq;
  bool ok = true;
  {
    const std::int64_t r = validation_rows(rows);
    const auto x = random_floats(r * cols, 1), res = random_floats(r * cols, 2);
    const auto w = random_floats(cols, 3), b = random_floats(cols, 4);
    std::vector<float> sum(x.size()), ref(x.size()), mean(r), rstd(r);
    mds::ops::cpu::add(sum.data(), x.data(), res.data(), r * cols);
    mds::ops::cpu::layernorm_forward(ref.data(), mean.data(), rstd.data(), sum.data(), w.data(),
                                     b.data(), r, cols, 1e-5f);
    Buffer<float> dx(x), dres(res), dw(w), db(b), dsum(x.size()), out(x.size()), dm(r), ds(r);
    mds::kernels::residual_layernorm_forward(dsum.get(), out.get(), dm.get(), ds.get(), dx.get(),
                                             dres.get(), dw.get(), db.get(), r, cols, 1e-5f,
                                             nullptr);
    ok &= validate("residual_layernorm_forward", out.download(), ref, 1e-5);
  }
  const auto n = static_cast<std::size_t>(rows * cols);
  Buffer<float> x(random_floats(rows * cols, 5)), res(random_floats(rows * cols, 6));
  Buffer<float> w(random_floats(cols, 7)), b(random_floats(cols, 8)), sum(n), out(n);
  Buffer<float> mean(static_cast<std::size_t>(rows)), rstd(static_cast<std::size_t>(rows));
  const double ln_ms = time_ms(
      [&] {
        mds::kernels::layernorm_forward(out.get(), mean.get(), rstd.get(), x.get(), w.get(),
                                        b.get(), rows, cols, 1e-5f, nullptr);
      },
      o.iters);
  report_bytes("layernorm_forward", ln_ms, 2.0 * kF * static_cast<double>(n), peak);
  const double res_ms = time_ms(
      [&] {
        mds::kernels::residual_layernorm_forward(sum.get(), out.get(), mean.get(), rstd.get(),
                                                 x.get(), res.get(), w.get(), b.get(), rows, cols,
                                                 1e-5f, nullptr);
      },
      o.iters);
  report_bytes("residual_layernorm_forward", res_ms, 4.0 * kF * static_cast<double>(n), peak);
  return ok;
}

bool bench_gelu(const Options& o, const Peak& peak) {
  const std::int64_t cols = 4 * o.hidden, rows = o.batch * o.seq;
  const auto kind = mds::ops::GeluKind::kTanhFused;
  bool ok = true;
  {
    const std::int64_t r = validation_rows(rows);
    const auto x = random_floats(r * cols, 9), bias = random_floats(cols, 10);
    std::vector<float> ref(x.size());
    mds::ops::cpu::bias_gelu_forward(ref.data(), x.data(), bias.data(), r, cols, kind);
    Buffer<float> dx(x), db(bias), out(x.size());
    mds::kernels::bias_gelu_forward(out.get(), dx.get(), db.get(), r, cols, kind, nullptr);
    ok &= validate("bias_gelu_forward", out.download(), ref, 2e-6);
  }
  const auto n = static_cast<std::size_t>(rows * cols);
  Buffer<float> x(random_floats(rows * cols, 11)), bias(random_floats(cols, 12)), out(n);
  const double ms = time_ms(
      [&] {
        mds::kernels::bias_gelu_forward(out.get(), x.get(), bias.get(), rows, cols, kind, nullptr);
      },
      o.iters);
  report_bytes("bias_gelu_forward", ms, 2.0 * kF * static_cast<double>(n), peak);
  return ok;
}

bool bench_cross_entropy(const Options& o, const Peak& peak) {
  const std::int64_t v = o.vocab, rows = o.batch * o.seq;
  bool ok = true;
  {
    const std::int64_t r = validation_rows(rows);
    const auto logits = random_floats(r * v, 13, -4.0f, 4.0f);
    const auto targets = random_ids(r, v, 14);
    std::vector<float> exps = logits, max(r), tl(r), sum(r), loss(r);
    mds::ops::cpu::cross_entropy_row_max(max.data(), exps.data(), r, v);
    mds::ops::cpu::cross_entropy_target_logit(tl.data(), exps.data(), targets.data(), max.data(), r,
                                              v, 0);
    mds::ops::cpu::cross_entropy_exp_sum(sum.data(), exps.data(), max.data(), r, v);
    mds::ops::cpu::cross_entropy_loss(loss.data(), sum.data(), tl.data(), r);
    Buffer<float> dlogits(logits), dloss(r), dmax(r), dsum(r);
    Buffer<std::int64_t> dtargets(targets);
    mds::kernels::cross_entropy_forward(dloss.get(), dmax.get(), dsum.get(), dlogits.get(),
                                        dtargets.get(), r, v, nullptr);
    ok &= validate("cross_entropy_forward", dloss.download(), loss, 1e-5);
  }
  const auto n = static_cast<std::size_t>(rows * v), ur = static_cast<std::size_t>(rows);
  // Timing only: after the first call the buffer holds exps, which is just as good an input.
  Buffer<float> logits(random_floats(rows * v, 15)), loss(ur), max(ur), sum(ur);
  Buffer<float> dloss(random_floats(rows, 37));
  Buffer<std::int64_t> targets(random_ids(rows, v, 16));
  const double fwd_ms = time_ms(
      [&] {
        mds::kernels::cross_entropy_forward(loss.get(), max.get(), sum.get(), logits.get(),
                                            targets.get(), rows, v, nullptr);
      },
      o.iters);
  report_bytes("cross_entropy_forward", fwd_ms, 2.0 * kF * static_cast<double>(n), peak);
  const double bwd_ms = time_ms(
      [&] {
        mds::kernels::cross_entropy_backward(logits.get(), logits.get(), targets.get(), sum.get(),
                                             dloss.get(), rows, v, 0, nullptr);
      },
      o.iters);
  report_bytes("cross_entropy_backward", bwd_ms, 2.0 * kF * static_cast<double>(n), peak);
  return ok;
}

bool bench_embedding(const Options& o, const Peak& peak) {
  const std::int64_t h = o.hidden, n = o.batch * o.seq, v = o.vocab, positions = o.seq;
  const auto tokens = random_ids(n, v, 17);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(n));
  for (std::int64_t t = 0; t < n; ++t) pos[static_cast<std::size_t>(t)] = t % positions;
  const auto wte = random_floats(v * h, 18), wpe = random_floats(positions * h, 19);
  const auto dout = random_floats(n * h, 20);
  bool ok = true;
  {
    std::vector<float> ref(static_cast<std::size_t>(n * h)), dref(wte.size(), 0.0f);
    mds::ops::cpu::embedding_lookup(ref.data(), tokens.data(), wte.data(), n, h, v, 0, false);
    mds::ops::cpu::embedding_lookup(ref.data(), pos.data(), wpe.data(), n, h, positions, 0, true);
    mds::ops::cpu::embedding_backward(dref.data(), dout.data(), tokens.data(), n, h, v, 0);
    Buffer<float> dwte(wte), dwpe(wpe), out(ref.size()), ddout(dout);
    Buffer<float> dtable(dref.size());
    check_cuda(cudaMemset(dtable.get(), 0, dref.size() * sizeof(float)), "memset");
    Buffer<std::int64_t> dtokens(tokens), dpos(pos);
    mds::kernels::embedding_forward(out.get(), dtokens.get(), dwte.get(), dpos.get(), dwpe.get(), n,
                                    h, nullptr);
    mds::kernels::embedding_backward(dtable.get(), ddout.get(), dtokens.get(), n, h, v, 0, nullptr);
    ok &= validate("embedding_forward", out.download(), ref, 0.0);
    ok &= validate("embedding_backward", dtable.download(), dref, 0.0);
  }
  Buffer<float> dwte(wte), dwpe(wpe), out(static_cast<std::size_t>(n * h)), ddout(dout);
  Buffer<float> dtable(wte.size());
  Buffer<std::int64_t> dtokens(tokens), dpos(pos);
  const std::size_t bytes = mds::kernels::embedding_backward_workspace_bytes(n, v);
  Buffer<std::uint8_t> workspace(bytes);
  const double fwd_ms = time_ms(
      [&] {
        mds::kernels::embedding_forward(out.get(), dtokens.get(), dwte.get(), dpos.get(),
                                        dwpe.get(), n, h, nullptr);
      },
      o.iters);
  report_bytes("embedding_forward", fwd_ms, 3.0 * kF * static_cast<double>(n * h), peak);
  const double bwd_ms = time_ms(
      [&] {
        mds::kernels::embedding_backward(dtable.get(), ddout.get(), dtokens.get(), n, h, v, 0,
                                         workspace.get(), bytes, nullptr);
      },
      o.iters);
  // dout read once, each touched table row read and written (at most n of them).
  report_bytes("embedding_backward (sort+add)", bwd_ms, 3.0 * kF * static_cast<double>(n * h),
               peak);
  return ok;
}

bool bench_attention(const Options& o, const Peak& peak) {
  const std::int64_t hn = o.hidden / o.heads;
  if (!mds::kernels::attention_head_dim_supported(hn)) {
    std::printf("attention: head dim %lld has no kernel, skipped\n", static_cast<long long>(hn));
    return true;
  }
  bool ok = true;
  {
    // One sequence, all heads.
    const mds::ops::cpu::AttentionDims d{o.seq, 1, o.heads, hn};
    const auto qkv = random_floats(3 * o.seq * o.hidden, 21, -2.0f, 2.0f);
    const auto dctx = random_floats(o.seq * o.hidden, 22);
    std::vector<float> probs(static_cast<std::size_t>(o.heads * o.seq * o.seq));
    std::vector<float> dprobs(probs.size()), ctx(dctx.size()), dqkv(qkv.size(), 0.0f);
    mds::ops::cpu::attention_probs_forward(probs.data(), qkv.data(), d, 1.0f);
    mds::ops::cpu::attention_context_forward(ctx.data(), probs.data(), qkv.data(), d);
    mds::ops::cpu::attention_context_backward(dprobs.data(), dqkv.data(), dctx.data(), probs.data(),
                                              qkv.data(), d);
    mds::ops::cpu::attention_probs_backward(dqkv.data(), dprobs.data(), probs.data(), qkv.data(), d,
                                            1.0f);
    Buffer<float> dq(qkv), dc(dctx), out(ctx.size()),
        lse(static_cast<std::size_t>(o.heads * o.seq));
    Buffer<float> grad(std::vector<float>(qkv.size(), 0.0f));
    mds::kernels::attention_forward(out.get(), lse.get(), dq.get(), d, 1.0f, {}, nullptr);
    mds::kernels::attention_backward(grad.get(), dc.get(), out.get(), lse.get(), dq.get(), d, 1.0f,
                                     {}, nullptr);
    ok &= validate("attention_forward", out.download(), ctx, 1e-5);
    ok &= validate("attention_backward", grad.download(), dqkv, 2e-5);
  }
  const mds::ops::cpu::AttentionDims d{o.seq, o.batch, o.heads, hn};
  const std::int64_t tokens = o.batch * o.seq;
  Buffer<float> qkv(random_floats(3 * tokens * o.hidden, 23, -2.0f, 2.0f));
  Buffer<float> dctx(random_floats(tokens * o.hidden, 24));
  Buffer<float> ctx(static_cast<std::size_t>(tokens * o.hidden)),
      dqkv(3 * static_cast<std::size_t>(tokens * o.hidden));
  Buffer<float> lse(static_cast<std::size_t>(o.batch * o.heads * o.seq));
  check_cuda(cudaMemset(dqkv.get(), 0, 3 * static_cast<std::size_t>(tokens * o.hidden) * 4),
             "memset");
  // Causal: half of the s² scores; two products (q·kᵀ, p·v) of 2·hn FLOPs each per score.
  const double forward_flops = 4.0 * static_cast<double>(o.batch * o.heads) *
                               static_cast<double>(o.seq) * static_cast<double>(o.seq) / 2.0 *
                               static_cast<double>(hn);
  const double fwd_ms = time_ms(
      [&] {
        mds::kernels::attention_forward(ctx.get(), lse.get(), qkv.get(), d, 1.0f, {}, nullptr);
      },
      o.iters);
  report_flops("attention_forward (fp32)", fwd_ms, forward_flops, peak.fp32_flops);
  const double bwd_ms = time_ms(
      [&] {
        mds::kernels::attention_backward(dqkv.get(), dctx.get(), ctx.get(), lse.get(), qkv.get(), d,
                                         1.0f, {}, nullptr);
      },
      o.iters);
  // Counted as FlashAttention-2 does: the backward's useful work is 2.5× the forward's (ours
  // recomputes scores and dp once more, 3.5×, which this rate does not credit).
  report_flops("attention_backward (fp32)", bwd_ms, 2.5 * forward_flops, peak.fp32_flops);
  return ok;
}

// The MLP's fc1 as ops::linear_forward/backward run it under --bf16: bf16 x, weight, bias, out,
// dout and dx (dx accumulated with beta = 1), fp32 dweight and dbias.
void bench_linear_bf16(mds::kernels::GemmContext& context, const Options& o, const Peak& peak) {
  const std::int64_t m = o.batch * o.seq, n = 4 * o.hidden, k = o.hidden;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * k;
  const auto mk = static_cast<std::size_t>(m * k), nk = static_cast<std::size_t>(n * k);
  const auto mn = static_cast<std::size_t>(m * n), un = static_cast<std::size_t>(n);
  Buffer<std::uint16_t> x(mk), w(nk), bias(un), out(mn), dx(mk);
  Buffer<float> dw(nk), db(un);
  // 0x3C3C: about 0.0115 in bf16, so nothing overflows however often dx and dw accumulate.
  const auto fill = [](void* p, std::size_t bytes, int value) {
    check_cuda(cudaMemset(p, value, bytes), "memset");
  };
  fill(x.get(), mk * 2, 0x3C);
  fill(w.get(), nk * 2, 0x3C);
  fill(bias.get(), un * 2, 0x3C);
  fill(dx.get(), mk * 2, 0x3C);
  fill(dw.get(), nk * 4, 0);
  fill(db.get(), un * 4, 0);
  const double fwd_ms = time_ms(
      [&] {
        mds::kernels::linear_forward(context, out.get(), x.get(), w.get(), bias.get(),
                                     DType::kBFloat16, m, n, k, nullptr);
      },
      o.iters);
  report_flops("linear fc1 fwd bf16 (+bias)", fwd_ms, flops, peak.tensor_flops);
  mds::kernels::ColumnSumScratch scratch;
  const double bwd_ms = time_ms(
      [&] {
        mds::kernels::linear_backward(context, dx.get(), dw.get(), db.get(), out.get(), x.get(),
                                      w.get(), DType::kBFloat16, m, n, k, scratch, nullptr);
      },
      o.iters);
  // dx and dweight: two products of the forward's size (the dbias column sum is not counted).
  report_flops("linear fc1 bwd bf16 (dx, fp32 dw, db)", bwd_ms, 2.0 * flops, peak.tensor_flops);

  // fc1 and its bias-GeLU as the model runs them by default (the GEMM, then the kernel), against
  // cuBLASLt's GELU_BIAS epilogue in the GEMM and GELU_AUX_BIAS (which also stores the
  // pre-activation the backward needs: --cublaslt-epilogues).
  Buffer<std::uint16_t> gelu(mn);
  const double split_ms = time_ms(
      [&] {
        mds::kernels::linear_forward(context, out.get(), x.get(), w.get(), nullptr,
                                     DType::kBFloat16, m, n, k, nullptr);
        mds::kernels::bias_gelu_forward(gelu.get(), out.get(), bias.get(), DType::kBFloat16,
                                        DType::kBFloat16, m, n, mds::ops::GeluKind::kTanhFused,
                                        nullptr);
      },
      o.iters);
  report_flops("fc1 fwd bf16: GEMM, then the bias-GeLU kernel", split_ms, flops, peak.tensor_flops);
  // GELU_AUX_BIAS also writes the GeLU input, which the backward reads.
  Buffer<std::uint16_t> pre(mn);
  const auto time_epilogue = [&](mds::kernels::GemmEpilogue kind, void* aux) {
    mds::kernels::GemmOptions epilogue;
    epilogue.input = epilogue.output = DType::kBFloat16;
    epilogue.epilogue = kind;
    epilogue.bias = bias.get();
    epilogue.aux = aux;
    return time_ms(
        [&] {
          mds::kernels::gemm(context, m, n, k, 1.0f, {x.get(), k, false}, {w.get(), k, true}, 0.0f,
                             gelu.get(), n, epilogue, nullptr);
        },
        o.iters);
  };
  report_flops("fc1 fwd bf16: GEMM with the GELU_BIAS epilogue",
               time_epilogue(mds::kernels::GemmEpilogue::kBiasGelu, nullptr), flops,
               peak.tensor_flops);
  report_flops("fc1 fwd bf16: GEMM with the GELU_AUX_BIAS epilogue",
               time_epilogue(mds::kernels::GemmEpilogue::kBiasGeluAux, pre.get()), flops,
               peak.tensor_flops);
}

// Each bf16 GEMM of a training micro-batch (the four layer products forward, dgrad into bf16 and
// wgrad into fp32, and the LM head's) run with every algorithm cuBLASLt's heuristic offers (up to
// 16): the heuristic's first choice, which kernels::gemm runs, against the fastest, and what the
// micro-batch's GEMMs would take with each. Decides whether a GEMM autotuner is worth having.
void bench_gemm_algorithms(mds::kernels::GemmContext& context, const Options& o, const Peak& peak) {
  struct Product {
    const char* name;
    std::int64_t out, in, count;  // weight [out, in]; count per micro-batch
  };
  const std::int64_t h = o.hidden, tokens = o.batch * o.seq;
  const std::int64_t layers = 12;  // GPT-2 124M's; the LM head once
  const Product products[] = {{"qkv", 3 * h, h, layers},
                              {"dense", h, h, layers},
                              {"fc1", 4 * h, h, layers},
                              {"fc2", h, 4 * h, layers},
                              {"lm head", o.vocab, h, 1}};
  // Every weight is [widest or less, h] or [h, 4h]; activations [tokens, widest or less].
  const auto widest = static_cast<std::size_t>(o.vocab > 4 * h ? o.vocab : 4 * h);
  const std::size_t activations = static_cast<std::size_t>(tokens) * widest,
                    weights = widest * static_cast<std::size_t>(h);
  Buffer<std::uint16_t> x(activations), w(weights), out(activations);
  Buffer<float> dw(weights);
  check_cuda(cudaMemset(x.get(), 0x3C, activations * 2), "memset");
  check_cuda(cudaMemset(w.get(), 0x3C, weights * 2), "memset");
  mds::kernels::GemmOptions bf16;
  bf16.input = bf16.output = DType::kBFloat16;
  mds::kernels::GemmOptions wgrad = bf16;
  wgrad.output = DType::kFloat32;
  double first_total = 0.0, best_total = 0.0;
  for (const Product& p : products) {
    // forward out[t, n] = x[t, k]·W[n, k]ᵀ; dgrad dx[t, k] = dout[t, n]·W[n, k];
    // wgrad dW[n, k] = dout[t, n]ᵀ·x[t, k].
    const std::int64_t n = p.out, k = p.in;
    const std::vector<std::pair<std::string, std::vector<float>>> passes = {
        {"forward", mds::kernels::time_gemm_algorithms(
                        context, tokens, n, k, 1.0f, {x.get(), k, false}, {w.get(), k, true}, 0.0f,
                        out.get(), n, bf16, 16, o.iters, nullptr)},
        {"dgrad", mds::kernels::time_gemm_algorithms(context, tokens, k, n, 1.0f,
                                                     {x.get(), n, false}, {w.get(), k, false}, 0.0f,
                                                     out.get(), k, bf16, 16, o.iters, nullptr)},
        {"wgrad", mds::kernels::time_gemm_algorithms(
                      context, n, k, tokens, 1.0f, {x.get(), n, true}, {out.get(), k, false}, 0.0f,
                      dw.get(), k, wgrad, 16, o.iters, nullptr)}};
    const double flops = 2.0 * static_cast<double>(tokens) * static_cast<double>(n) * k;
    for (const auto& [pass, times] : passes) {
      if (times.empty()) continue;
      std::size_t best = 0;
      for (std::size_t i = 1; i < times.size(); ++i) best = times[i] < times[best] ? i : best;
      const std::string name = "gemm algorithms " + std::string(p.name) + " " + pass;
      std::printf(
          "%-34s heuristic %.3f ms (%.0f TFLOP/s), best %.3f ms (%.0f TFLOP/s, #%zu of %zu)\n",
          name.c_str(), times[0], flops / (times[0] * 1e9), times[best],
          flops / (times[best] * 1e9), best + 1, times.size());
      first_total += static_cast<double>(p.count) * times[0];
      best_total += static_cast<double>(p.count) * times[best];
    }
  }
  std::printf(
      "gemm algorithms, a micro-batch's GEMMs: heuristic %.3f ms, best of each %.3f ms "
      "(%.1f%% less; bf16 peak %.0f TFLOP/s)\n",
      first_total, best_total, 100.0 * (1.0 - best_total / first_total), peak.tensor_flops / 1e12);
}

bool bench_gemm(const Options& o, const Peak& peak) {
  mds::kernels::GemmContext context;
  const std::int64_t m = o.batch * o.seq, n = 4 * o.hidden, k = o.hidden;  // the MLP's fc1
  bool ok = true;
  {
    const std::int64_t r = validation_rows(m);
    const auto x = random_floats(r * k, 25), w = random_floats(n * k, 26);
    std::vector<float> ref(static_cast<std::size_t>(r * n));
    mds::ops::cpu::gemm(r, n, k, 1.0f, {x.data(), k, false}, {w.data(), k, true}, 0.0f, ref.data(),
                        n);
    Buffer<float> dx(x), dw(w), out(ref.size());
    mds::kernels::linear_forward(context, out.get(), dx.get(), dw.get(), nullptr, r, n, k, nullptr);
    ok &= validate("linear_forward (fp32)", out.download(), ref, 1e-5);
  }
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * k;
  Buffer<float> x(random_floats(m * k, 27)), w(random_floats(n * k, 28));
  Buffer<float> out(static_cast<std::size_t>(m * n));
  Buffer<std::uint16_t> x16(static_cast<std::size_t>(m * k)), w16(static_cast<std::size_t>(n * k));
  Buffer<std::uint16_t> out16(static_cast<std::size_t>(m * n));
  check_cuda(cudaMemset(x16.get(), 0x3C, static_cast<std::size_t>(m * k) * 2), "memset");
  check_cuda(cudaMemset(w16.get(), 0x3C, static_cast<std::size_t>(n * k) * 2), "memset");
  struct Variant {
    const char* name;
    DType dtype;
    mds::kernels::GemmMath math;
    double peak;
  };
  const Variant variants[] = {
      {"gemm fc1 fwd fp32", DType::kFloat32, mds::kernels::GemmMath::kFp32, peak.fp32_flops},
      {"gemm fc1 fwd tf32", DType::kFloat32, mds::kernels::GemmMath::kTf32, peak.tensor_flops / 2},
      {"gemm fc1 fwd bf16", DType::kBFloat16, mds::kernels::GemmMath::kFp32, peak.tensor_flops}};
  for (const Variant& variant : variants) {
    mds::kernels::GemmOptions options;
    options.input = options.output = variant.dtype;
    options.math = variant.math;
    const bool wide = variant.dtype == DType::kFloat32;
    const void* a = wide ? static_cast<const void*>(x.get()) : x16.get();
    const void* b = wide ? static_cast<const void*>(w.get()) : w16.get();
    void* c = wide ? static_cast<void*>(out.get()) : out16.get();
    const double ms = time_ms(
        [&] {
          mds::kernels::gemm(context, m, n, k, 1.0f, {a, k, false}, {b, k, true}, 0.0f, c, n,
                             options, nullptr);
        },
        o.iters);
    report_flops(variant.name, ms, flops, variant.peak);
  }
  bench_linear_bf16(context, o, peak);
  bench_gemm_algorithms(context, o, peak);
  return ok;
}

// BF16_Optimizer's copies between the parameter table and its flat group, as a step runs them
// (kernels::cast_pieces, one piece a GPT-2 124M parameter): the fp32 gradients gathered into the
// group times the clipping factor, and the new bf16 weights scattered back.
void bench_cast_pieces(const Options& o, const Peak& peak) {
  const std::int64_t h = o.hidden;
  std::vector<std::int64_t> sizes = {o.vocab * h, o.seq * h};
  for (int layer = 0; layer < 12; ++layer) {
    for (const std::int64_t numel :
         {h, h, 3 * h * h, 3 * h, h * h, h, h, h, 4 * h * h, 4 * h, 4 * h * h, h}) {
      sizes.push_back(numel);
    }
  }
  sizes.insert(sizes.end(), {h, h});
  std::vector<mds::ops::CastPiece> gather, scatter;
  std::int64_t flat = 0, table = 0;
  for (const std::int64_t numel : sizes) {
    gather.push_back({flat, table, numel});
    scatter.push_back({table, flat, numel});
    flat += numel;
    table += numel + 64;  // the table's own alignment padding
  }
  Buffer<float> grads(static_cast<std::size_t>(table)), group(static_cast<std::size_t>(flat));
  Buffer<std::uint16_t> weights(static_cast<std::size_t>(table)),
      weights_flat(static_cast<std::size_t>(flat));
  check_cuda(cudaMemset(grads.get(), 0, static_cast<std::size_t>(table) * 4), "memset");
  check_cuda(cudaMemset(weights_flat.get(), 0, static_cast<std::size_t>(flat) * 2), "memset");
  const double bytes = static_cast<double>(flat);
  report_bytes("cast_pieces fp32 gradients gathered, times a factor",
               time_ms(
                   [&] {
                     mds::kernels::cast_pieces(group.get(), DType::kFloat32, grads.get(),
                                               DType::kFloat32, gather, 0.5f, nullptr, nullptr);
                   },
                   o.iters),
               8.0 * bytes, peak);
  report_bytes("cast_pieces bf16 weights scattered",
               time_ms(
                   [&] {
                     mds::kernels::cast_pieces(weights.get(), DType::kBFloat16, weights_flat.get(),
                                               DType::kBFloat16, scatter, 1.0f, nullptr, nullptr);
                   },
                   o.iters),
               4.0 * bytes, peak);
}

bool bench_adam(const Options& o, const Peak& peak) {
  // GPT-2 124M's parameter count, roughly: 12 layers of 12·C² plus the embeddings.
  const std::int64_t n = 12 * 12 * o.hidden * o.hidden + (o.vocab + o.seq) * o.hidden;
  mds::ops::AdamWConfig config;
  config.lr = 3e-4f;
  config.weight_decay = 0.1f;
  bool ok = true;
  {
    const std::int64_t r = 1 << 16;
    auto p = random_floats(r, 29), m = random_floats(r, 30, -0.01f, 0.01f);
    auto v = random_floats(r, 31, 0.0f, 1e-4f);
    const auto g = random_floats(r, 32, -0.1f, 0.1f);
    Buffer<float> dp(p), dm(m), dv(v), dg(g);
    mds::ops::cpu::adamw_step(p.data(), g.data(), m.data(), v.data(), r, config, 0.1f, 0.001f);
    mds::kernels::adamw_step(dp.get(), dg.get(), dm.get(), dv.get(), r, config, 0.1f, 0.001f,
                             nullptr);
    ok &= validate("adamw_step", dp.download(), p, 0.0);
  }
  Buffer<float> p(random_floats(n, 33)), m(random_floats(n, 34, -0.01f, 0.01f));
  Buffer<float> v(random_floats(n, 35, 0.0f, 1e-4f)), g(random_floats(n, 36, -0.1f, 0.1f));
  const double ms = time_ms(
      [&] {
        mds::kernels::adamw_step(p.get(), g.get(), m.get(), v.get(), n, config, 0.1f, 0.001f,
                                 nullptr);
      },
      o.iters);
  report_bytes("adamw_step", ms, 7.0 * kF * static_cast<double>(n), peak);
  bench_cast_pieces(o, peak);
  return ok;
}

// bf16 activations (fp32 math inside, parameters fp32): validated against the host ops on bf16
// tensors (their CPU twins; the one-ulp differences of LayerNorm and GeLU stay far below the
// bound), then timed with 2-byte activation traffic.
std::vector<std::uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<std::uint16_t> out;
  for (const float x : v) out.push_back(mds::tensor::to_bfloat16(x).bits);
  return out;
}

std::vector<float> widen_bf16(const std::vector<std::uint16_t>& v) {
  std::vector<float> out;
  for (const std::uint16_t b : v) out.push_back(mds::tensor::to_float(mds::tensor::BFloat16{b}));
  return out;
}

mds::tensor::Tensor bf16_view(std::vector<std::uint16_t>& v, mds::tensor::Shape shape) {
  return {v.data(), DType::kBFloat16, shape};
}

mds::tensor::Tensor f32_view(std::vector<float>& v, mds::tensor::Shape shape) {
  return {v.data(), DType::kFloat32, shape};
}

// The bf16 flash attention of a --bf16 run, on the tensor-core kernels (kAuto's pick at head dims
// 64 and 128) and on the SIMT kernels (kSimt, fp32 CUDA-core math on widened values): first the
// two against each other at one sequence (the tensor-core kernels round P and dS to bf16, each
// family is within about 3e-3 of the host in norm; tests/gpu/attention_tc_test.cpp checks the
// elementwise bounds), then timed at the micro-batch's shape, without and with attention dropout
// (0.1, upstream's default: the Philox draws are part of the cost). TFLOP/s against the bf16
// tensor peak for both (what a bf16 run could get), FLOPs counted as for the fp32 kernels.
bool bench_attention_bf16(const Options& o, const Peak& peak) {
  using mds::kernels::AttentionKernel;
  const std::int64_t hn = o.hidden / o.heads;
  if (!mds::kernels::attention_tensor_core_supported(DType::kBFloat16, hn)) {
    std::printf("attention bf16: head dim %lld has no tensor-core kernel, skipped\n",
                static_cast<long long>(hn));
    return true;
  }
  bool ok = true;
  {
    const mds::ops::cpu::AttentionDims d{o.seq, 1, o.heads, hn};
    const auto qkv = to_bf16_bits(random_floats(3 * o.seq * o.hidden, 25, -2.0f, 2.0f));
    const auto dctx = to_bf16_bits(random_floats(o.seq * o.hidden, 26));
    const std::vector<std::uint16_t> zeros(qkv.size(), 0);
    Buffer<std::uint16_t> q(qkv), dc(dctx), ctx_tc(dctx.size()), ctx_simt(dctx.size());
    Buffer<std::uint16_t> grad_tc(zeros), grad_simt(zeros);
    Buffer<float> lse_tc(static_cast<std::size_t>(o.heads * o.seq)),
        lse_simt(static_cast<std::size_t>(o.heads * o.seq));
    const auto both = [&](AttentionKernel kernel, Buffer<std::uint16_t>& ctx, Buffer<float>& lse,
                          Buffer<std::uint16_t>& grad) {
      mds::kernels::attention_forward(ctx.get(), lse.get(), q.get(), DType::kBFloat16, d, 1.0f, {},
                                      nullptr, kernel);
      mds::kernels::attention_backward(grad.get(), dc.get(), ctx.get(), lse.get(), q.get(),
                                       DType::kBFloat16, d, 1.0f, {}, nullptr, kernel);
    };
    both(AttentionKernel::kTensorCore, ctx_tc, lse_tc, grad_tc);
    both(AttentionKernel::kSimt, ctx_simt, lse_simt, grad_simt);
    // 4u of bf16 in norm: room for both families' errors against the host.
    ok &= validate("attention_forward bf16 tc/simt", widen_bf16(ctx_tc.download()),
                   widen_bf16(ctx_simt.download()), 0x1p-6);
    ok &= validate("attention_backward bf16 tc/simt", widen_bf16(grad_tc.download()),
                   widen_bf16(grad_simt.download()), 0x1p-6);
    // The trial launch shapes compute every row and sum as the default ones: the same bits.
    Buffer<std::uint16_t> ctx_trial(dctx.size()), grad_trial(zeros);
    Buffer<float> lse_trial(static_cast<std::size_t>(o.heads * o.seq));
    both(AttentionKernel::kTensorCoreTrialShapes, ctx_trial, lse_trial, grad_trial);
    const bool same = ctx_trial.download() == ctx_tc.download() &&
                      lse_trial.download() == lse_tc.download() &&
                      grad_trial.download() == grad_tc.download();
    std::printf("  validate %-28s %s\n", "attention bf16 trial shapes",
                same ? "the default shapes' bits ok" : "bits differ from the default shapes' FAIL");
    ok &= same;
  }
  const mds::ops::cpu::AttentionDims d{o.seq, o.batch, o.heads, hn};
  const std::int64_t tokens = o.batch * o.seq;
  Buffer<std::uint16_t> qkv(to_bf16_bits(random_floats(3 * tokens * o.hidden, 27, -2.0f, 2.0f)));
  Buffer<std::uint16_t> dctx(to_bf16_bits(random_floats(tokens * o.hidden, 28)));
  Buffer<std::uint16_t> ctx(static_cast<std::size_t>(tokens * o.hidden)),
      dqkv(std::vector<std::uint16_t>(3 * static_cast<std::size_t>(tokens * o.hidden), 0));
  Buffer<float> lse(static_cast<std::size_t>(o.batch * o.heads * o.seq));
  const double forward_flops = 4.0 * static_cast<double>(o.batch * o.heads) *
                               static_cast<double>(o.seq) * static_cast<double>(o.seq) / 2.0 *
                               static_cast<double>(hn);
  // The dropout's keep bits (kernels/attention.h), as a --bf16 run keeps them: written by the
  // forward, read by the backward instead of drawing.
  Buffer<std::uint32_t> keep(static_cast<std::size_t>(o.batch * o.heads * o.seq *
                                                      mds::kernels::attention_keep_words(o.seq)));
  const struct {
    AttentionKernel kernel;
    float p;
    bool keep_bits;
    const char* forward;
    const char* backward;
  } runs[] = {
      {AttentionKernel::kTensorCore, 0.0f, false, "attention_forward (bf16, tc)",
       "attention_backward (bf16, tc)"},
      {AttentionKernel::kTensorCoreTrialShapes, 0.0f, false,
       "attention_forward (bf16, tc, trial shapes: 2 atoms a warp)",
       "attention_backward (bf16, tc, trial shapes: dk/dv steps of 32, dq 2 atoms a warp)"},
      {AttentionKernel::kTensorCore, 0.1f, false, "attention_forward (bf16, tc, p=0.1)",
       "attention_backward (bf16, tc, p=0.1)"},
      {AttentionKernel::kTensorCore, 0.1f, true, "attention_forward (bf16, tc, p=0.1, keep bits)",
       "attention_backward (bf16, tc, p=0.1, keep bits)"},
      {AttentionKernel::kTensorCoreTrialShapes, 0.1f, true,
       "attention_forward (bf16, tc, p=0.1, keep bits, trial shapes)",
       "attention_backward (bf16, tc, p=0.1, keep bits, trial shapes)"},
      {AttentionKernel::kSimt, 0.0f, false, "attention_forward (bf16, simt)",
       "attention_backward (bf16, simt)"}};
  for (const auto& r : runs) {
    const mds::ops::DropoutStream dropout{r.p, 1234, 0};
    std::uint32_t* keep_bits = r.keep_bits ? keep.get() : nullptr;
    const double fwd_ms = time_ms(
        [&] {
          mds::kernels::attention_forward(ctx.get(), lse.get(), qkv.get(), DType::kBFloat16, d,
                                          1.0f, dropout, nullptr, r.kernel, keep_bits);
        },
        o.iters);
    report_flops(r.forward, fwd_ms, forward_flops, peak.tensor_flops);
    const double bwd_ms = time_ms(
        [&] {
          mds::kernels::attention_backward(dqkv.get(), dctx.get(), ctx.get(), lse.get(), qkv.get(),
                                           DType::kBFloat16, d, 1.0f, dropout, nullptr, r.kernel,
                                           true, keep_bits);
        },
        o.iters);
    // FlashAttention-2's count, 2.5× the forward (both families compute scores and dp twice: 3.5×).
    report_flops(r.backward, bwd_ms, 2.5 * forward_flops, peak.tensor_flops);
  }
  return ok;
}

bool bench_attention_fp32_and_bf16(const Options& o, const Peak& peak) {
  const bool fp32 = bench_attention(o, peak);
  return bench_attention_bf16(o, peak) && fp32;
}

// The training step's cross entropy on GPT-2's head (bf16 logits, and fp32): the forward and the
// in-place backward kernels against cross_entropy_forward_backward, one kernel whose few blocks
// an SM should find each row in L2 for its gradient pass. Validated: the one kernel's loss and
// gradient are the two kernels' bits. Both rated against one read and one write of the logits.
template <typename E>
bool bench_cross_entropy_one_kernel(const Options& o, const Peak& peak, DType dtype,
                                    const char* name) {
  const auto stored = [](const std::vector<float>& v) {
    if constexpr (std::is_same_v<E, float>) {
      return v;
    } else {
      return to_bf16_bits(v);
    }
  };
  const std::int64_t v = o.vocab, rows = o.batch * o.seq;
  bool ok = true;
  {
    const std::int64_t r = validation_rows(rows);
    const auto ur = static_cast<std::size_t>(r);
    const auto logits = stored(random_floats(r * v, 41, -4.0f, 4.0f));
    Buffer<E> two(logits), one(logits);
    Buffer<float> loss_two(ur), loss_one(ur), max(ur), sum(ur), dloss(random_floats(r, 42));
    Buffer<std::int64_t> targets(random_ids(r, v, 43));
    mds::kernels::cross_entropy_forward(loss_two.get(), max.get(), sum.get(), two.get(), dtype,
                                        targets.get(), r, v, nullptr);
    mds::kernels::cross_entropy_backward(two.get(), two.get(), dtype, targets.get(), max.get(),
                                         sum.get(), dloss.get(), r, v, 0, nullptr);
    mds::kernels::cross_entropy_forward_backward(loss_one.get(), one.get(), one.get(), dtype,
                                                 targets.get(), dloss.get(), r, v, nullptr);
    const bool same =
        loss_one.download() == loss_two.download() && one.download() == two.download();
    std::printf("  validate %-28s %s\n", name,
                same ? "the two kernels' bits ok" : "bits differ from the two kernels' FAIL");
    ok &= same;
  }
  const auto ur = static_cast<std::size_t>(rows);
  Buffer<E> logits(stored(random_floats(rows * v, 44, -4.0f, 4.0f)));
  Buffer<float> loss(ur), max(ur), sum(ur), dloss(random_floats(rows, 45));
  Buffer<std::int64_t> targets(random_ids(rows, v, 46));
  const double bytes = 2.0 * sizeof(E) * static_cast<double>(rows * v);
  const double two_ms = time_ms(
      [&] {
        mds::kernels::cross_entropy_forward(loss.get(), max.get(), sum.get(), logits.get(), dtype,
                                            targets.get(), rows, v, nullptr);
        mds::kernels::cross_entropy_backward(logits.get(), logits.get(), dtype, targets.get(),
                                             max.get(), sum.get(), dloss.get(), rows, v, 0,
                                             nullptr);
      },
      o.iters);
  report_bytes((std::string(name) + " two kernels").c_str(), two_ms, bytes, peak);
  const double one_ms = time_ms(
      [&] {
        mds::kernels::cross_entropy_forward_backward(loss.get(), logits.get(), logits.get(), dtype,
                                                     targets.get(), dloss.get(), rows, v, nullptr);
      },
      o.iters);
  report_bytes((std::string(name) + " one kernel").c_str(), one_ms, bytes, peak);
  return ok;
}

bool bench_cross_entropy_fwd_bwd(const Options& o, const Peak& peak) {
  bool ok = bench_cross_entropy_one_kernel<std::uint16_t>(o, peak, DType::kBFloat16,
                                                          "cross_entropy fwd+bwd bf16");
  ok &=
      bench_cross_entropy_one_kernel<float>(o, peak, DType::kFloat32, "cross_entropy fwd+bwd fp32");
  return ok;
}

bool bench_activations16(const Options& o, const Peak& peak) {
  const std::int64_t cols = o.hidden, rows = o.batch * o.seq, ffn = 4 * o.hidden;
  const auto kind = mds::ops::GeluKind::kTanhFused;
  constexpr double kH = 2.0;  // bytes of a bf16 activation
  bool ok = true;
  {
    const std::int64_t r = validation_rows(rows);
    auto x = to_bf16_bits(random_floats(r * ffn, 40, -3.0f, 3.0f));
    auto bias = random_floats(ffn, 41), w = random_floats(cols, 42), b = random_floats(cols, 43);
    std::vector<std::uint16_t> ref(x.size()), ln_ref(static_cast<std::size_t>(r * cols));
    std::vector<float> mean(static_cast<std::size_t>(r)), rstd(mean.size());
    mds::ops::bias_gelu_forward(bf16_view(ref, {r, ffn}), bf16_view(x, {r, ffn}),
                                f32_view(bias, {ffn}), kind);
    std::vector<std::uint16_t> ln_x(x.begin(), x.begin() + r * cols);
    mds::ops::layernorm_forward(bf16_view(ln_ref, {r, cols}), f32_view(mean, {r}),
                                f32_view(rstd, {r}), bf16_view(ln_x, {r, cols}),
                                f32_view(w, {cols}), f32_view(b, {cols}), 1e-5f);
    Buffer<std::uint16_t> dx(x), dln_x(ln_x), out(x.size()), ln_out(ln_ref.size());
    Buffer<float> dbias(bias), dw(w), db(b), dm(mean.size()), ds(mean.size());
    mds::kernels::bias_gelu_forward(out.get(), dx.get(), dbias.get(), DType::kBFloat16, r, ffn,
                                    kind, nullptr);
    mds::kernels::layernorm_forward(ln_out.get(), dm.get(), ds.get(), dln_x.get(), dw.get(),
                                    db.get(), DType::kBFloat16, r, cols, 1e-5f, nullptr);
    ok &= validate("bias_gelu_forward bf16", widen_bf16(out.download()), widen_bf16(ref), 1e-3);
    ok &=
        validate("layernorm_forward bf16", widen_bf16(ln_out.download()), widen_bf16(ln_ref), 1e-3);
  }
  const auto n = static_cast<std::size_t>(rows * cols), nf = static_cast<std::size_t>(rows * ffn);
  Buffer<std::uint16_t> x(to_bf16_bits(random_floats(rows * cols, 44))), res(x.download());
  Buffer<std::uint16_t> sum(n), out(n), xf(to_bf16_bits(random_floats(rows * ffn, 45))), outf(nf);
  Buffer<float> w(random_floats(cols, 46)), b(random_floats(cols, 47)), bf(random_floats(ffn, 48));
  Buffer<float> mean(static_cast<std::size_t>(rows)), rstd(static_cast<std::size_t>(rows));
  const auto dn = static_cast<double>(n), dnf = static_cast<double>(nf);
  const auto bf16 = DType::kBFloat16;
  report_bytes("layernorm_forward bf16",
               time_ms(
                   [&] {
                     mds::kernels::layernorm_forward(out.get(), mean.get(), rstd.get(), x.get(),
                                                     w.get(), b.get(), bf16, rows, cols, 1e-5f,
                                                     nullptr);
                   },
                   o.iters),
               2.0 * kH * dn, peak);
  // Both LayerNorm families (kernels/layernorm.h) at the same shape: the block kernels forced,
  // then kAuto's warp kernels; the backward's dx too (reads dout, x, dx; writes dx).
  Buffer<std::uint16_t> dgrad(x.download());
  mds::kernels::ColumnSumScratch scratch;
  for (const auto family :
       {mds::kernels::LayerNormKernel::kBlock, mds::kernels::LayerNormKernel::kAuto}) {
    const bool block = family == mds::kernels::LayerNormKernel::kBlock;
    report_bytes(block ? "layernorm_forward bf16 (block per row)" : "layernorm_forward bf16 (auto)",
                 time_ms(
                     [&] {
                       mds::kernels::layernorm_forward(out.get(), mean.get(), rstd.get(), x.get(),
                                                       w.get(), b.get(), bf16, DType::kFloat32,
                                                       rows, cols, 1e-5f, nullptr, family);
                     },
                     o.iters),
                 2.0 * kH * dn, peak);
    report_bytes(
        block ? "layernorm_backward dx bf16 (block per row)" : "layernorm_backward dx bf16 (auto)",
        time_ms(
            [&] {
              mds::kernels::layernorm_backward(
                  dgrad.get(), nullptr, nullptr, res.get(), x.get(), w.get(), mean.get(),
                  rstd.get(), bf16, DType::kFloat32, rows, cols, scratch, nullptr, family);
            },
            o.iters),
        4.0 * kH * dn, peak);
  }
  // The whole backward with dweight and dbias as training runs it: dx, then the column-sum
  // kernel reading dout and x again (before session 16), against dx and the sums in one pass plus
  // the small kernel adding the blocks' sums (kAuto since session 16). Bytes: the dx pass's.
  Buffer<float> ln_dw(static_cast<std::size_t>(cols)), ln_db(static_cast<std::size_t>(cols));
  for (const auto family :
       {mds::kernels::LayerNormKernel::kSeparateParams, mds::kernels::LayerNormKernel::kAuto}) {
    report_bytes(family == mds::kernels::LayerNormKernel::kAuto
                     ? "layernorm_backward bf16 with dweight, dbias (auto: one pass)"
                     : "layernorm_backward bf16 with dweight, dbias (dx, then column sums)",
                 time_ms(
                     [&] {
                       mds::kernels::layernorm_backward(dgrad.get(), ln_dw.get(), ln_db.get(),
                                                        res.get(), x.get(), w.get(), mean.get(),
                                                        rstd.get(), bf16, DType::kFloat32, rows,
                                                        cols, scratch, nullptr, family);
                     },
                     o.iters),
                 4.0 * kH * dn, peak);
  }
  report_bytes("residual_layernorm_forward bf16",
               time_ms(
                   [&] {
                     mds::kernels::residual_layernorm_forward(
                         sum.get(), out.get(), mean.get(), rstd.get(), x.get(), res.get(), w.get(),
                         b.get(), bf16, rows, cols, 1e-5f, nullptr);
                   },
                   o.iters),
               4.0 * kH * dn, peak);
  report_bytes("bias_gelu_forward bf16",
               time_ms(
                   [&] {
                     mds::kernels::bias_gelu_forward(outf.get(), xf.get(), bf.get(), bf16, rows,
                                                     ffn, kind, nullptr);
                   },
                   o.iters),
               2.0 * kH * dnf, peak);
  const mds::ops::DropoutStream stream{0.1f, 1, 0};
  report_bytes("bias_dropout_add bf16",
               time_ms(
                   [&] {
                     mds::kernels::dropout_forward(out.get(), x.get(), b.get(), res.get(), bf16,
                                                   rows * cols, cols, stream, nullptr);
                   },
                   o.iters),
               3.0 * kH * dn, peak);
  report_bytes(
      "add bf16",
      time_ms([&] { mds::kernels::add(sum.get(), x.get(), res.get(), bf16, rows * cols, nullptr); },
              o.iters),
      3.0 * kH * dn, peak);
  // bias-dropout-add's backward as the model runs it (dx and the bias gradient in one pass), and
  // the dropout's backward alone: what the bias gradient's column sums cost.
  Buffer<float> dbias_bda(static_cast<std::size_t>(cols));
  report_bytes("bias_dropout_add backward bf16 (dx and dbias)",
               time_ms(
                   [&] {
                     mds::kernels::bias_dropout_add_backward(out.get(), dbias_bda.get(), nullptr,
                                                             x.get(), bf16, rows, cols, stream,
                                                             false, scratch, nullptr);
                   },
                   o.iters),
               2.0 * kH * dn, peak);
  report_bytes("dropout backward bf16 (dx alone)",
               time_ms(
                   [&] {
                     mds::kernels::dropout_backward(out.get(), x.get(), bf16, rows * cols, stream,
                                                    false, nullptr);
                   },
                   o.iters),
               2.0 * kH * dn, peak);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  try {
    const Peak peak = device_peak();
    std::printf(
        "shape: batch %lld, seq %lld, hidden %lld, heads %lld, vocab %lld; %d timed calls\n",
        static_cast<long long>(o.batch), static_cast<long long>(o.seq),
        static_cast<long long>(o.hidden), static_cast<long long>(o.heads),
        static_cast<long long>(o.vocab), o.iters);
    const std::pair<const char*, bool (*)(const Options&, const Peak&)> benches[] = {
        {"embedding", bench_embedding},
        {"layernorm", bench_layernorm},
        {"attention", bench_attention_fp32_and_bf16},
        {"gemm", bench_gemm},
        {"gelu", bench_gelu},
        {"activations16", bench_activations16},
        {"cross_entropy", bench_cross_entropy},
        {"cross_entropy", bench_cross_entropy_fwd_bwd},
        {"adam", bench_adam}};
    bool ok = true;
    for (const auto& [name, run] : benches) {
      if (!o.only.empty() && o.only != name) continue;
      ok &= run(o, peak);
    }
    std::printf(ok ? "all validations passed\n" : "VALIDATION FAILED\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
}
