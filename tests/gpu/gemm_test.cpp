#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "base/error.h"
#include "kernels/gemm_gelu.h"
#include "ops/cpu/gelu.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/matmul.h"
#include "ops/gemm_tuning_file.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_floats;
using kernels::GemmContext;
using kernels::GemmOptions;
using tensor::DType;

struct Shape {
  std::int64_t m, n, k;
};
// Odd sizes, one of each dimension 1, a GPT-2 layer's projection and the vocabulary head.
const Shape kShapes[] = {{1, 1, 1},        {3, 5, 7},       {17, 33, 65},
                         {257, 129, 1000}, {64, 3072, 768}, {37, 50257, 64}};

// Row-major storage of op(X)[rows, cols] (transposed: stored [cols, rows]) with `pad` spare
// columns, so that ld exceeds the row length.
struct Matrix {
  std::vector<float> values;
  std::int64_t ld;
  bool transposed;
};
Matrix random_matrix(std::int64_t rows, std::int64_t cols, bool transposed, std::int64_t pad,
                     std::uint32_t seed) {
  const std::int64_t stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
  const std::int64_t ld = stored_cols + pad;
  return {random_floats(static_cast<std::size_t>(stored_rows * ld), seed, -1.0f, 1.0f), ld,
          transposed};
}

// Values rounded through a 16-bit type (what the GPU reads) and their bits.
std::vector<float> rounded(const std::vector<float>& v, DType dtype) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out[i] = dtype == DType::kBFloat16 ? tensor::to_float(tensor::to_bfloat16(v[i]))
                                       : tensor::to_float(tensor::to_float16(v[i]));
  }
  return out;
}
std::vector<std::uint16_t> bits16(const std::vector<float>& v, DType dtype) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out[i] =
        dtype == DType::kBFloat16 ? tensor::to_bfloat16(v[i]).bits : tensor::to_float16(v[i]).bits;
  }
  return out;
}
std::vector<float> from_bits16(const std::vector<std::uint16_t>& bits, DType dtype) {
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    out[i] = dtype == DType::kBFloat16 ? tensor::to_float(tensor::BFloat16{bits[i]})
                                       : tensor::to_float(tensor::Float16{bits[i]});
  }
  return out;
}

// One GEMM through kernels::gemm in the given precision against ops::cpu::gemm on the values the
// GPU actually reads; returns ‖out − ref‖/‖ref‖ (NaN where an element was not written).
double gemm_error(GemmContext& context, const Shape& s, bool ta, bool tb, DType input, DType output,
                  kernels::GemmMath math, std::uint32_t seed) {
  const float alpha = 0.75f, beta = 0.5f;
  Matrix a = random_matrix(s.m, s.k, ta, 3, seed), b = random_matrix(s.k, s.n, tb, 1, seed + 1);
  const std::int64_t ldc = s.n + 2;
  auto c = random_floats(static_cast<std::size_t>(s.m * ldc), seed + 2);
  if (input != DType::kFloat32) {
    a.values = rounded(a.values, input);
    b.values = rounded(b.values, input);
  }
  if (output != DType::kFloat32) c = rounded(c, output);
  std::vector<float> ref = c;
  ops::cpu::gemm(s.m, s.n, s.k, alpha, {a.values.data(), a.ld, ta}, {b.values.data(), b.ld, tb},
                 beta, ref.data(), ldc);
  GemmOptions options;
  options.input = input;
  options.output = output;
  options.math = math;
  std::vector<float> got;
  if (input == DType::kFloat32) {
    DeviceArray<float> da(a.values), db(b.values), dc(c);
    kernels::gemm(context, s.m, s.n, s.k, alpha, {da.get(), a.ld, ta}, {db.get(), b.ld, tb}, beta,
                  dc.get(), ldc, options, nullptr);
    got = dc.download();
  } else {
    DeviceArray<std::uint16_t> da(bits16(a.values, input)), db(bits16(b.values, input));
    if (output == DType::kFloat32) {
      DeviceArray<float> dc(c);
      kernels::gemm(context, s.m, s.n, s.k, alpha, {da.get(), a.ld, ta}, {db.get(), b.ld, tb}, beta,
                    dc.get(), ldc, options, nullptr);
      got = dc.download();
    } else {
      DeviceArray<std::uint16_t> dc(bits16(c, output));
      kernels::gemm(context, s.m, s.n, s.k, alpha, {da.get(), a.ld, ta}, {db.get(), b.ld, tb}, beta,
                    dc.get(), ldc, options, nullptr);
      got = from_bits16(dc.download(), output);
    }
  }
  EXPECT_EQ(gpu_test::non_finite(got), 0u);
  return gpu_test::relative_error(got, ref);
}

struct Precision {
  DType input, output;
  kernels::GemmMath math;
  double bound;
};
// fp32: summation order only. TF32 rounds each input to 11 significant bits (2^-11 relative).
// 16-bit inputs are exact in fp32, so with an fp32 output only the order differs; a 16-bit
// output adds its own rounding, 2^-9 (bf16) or 2^-11 (fp16) relative per element at most.
const Precision kPrecisions[] = {
    {DType::kFloat32, DType::kFloat32, kernels::GemmMath::kFp32, 1e-5},
    {DType::kFloat32, DType::kFloat32, kernels::GemmMath::kTf32, 5e-3},
    {DType::kBFloat16, DType::kFloat32, kernels::GemmMath::kFp32, 1e-5},
    {DType::kBFloat16, DType::kBFloat16, kernels::GemmMath::kFp32, 4e-3},
    {DType::kFloat16, DType::kFloat32, kernels::GemmMath::kFp32, 1e-5},
    {DType::kFloat16, DType::kFloat16, kernels::GemmMath::kFp32, 1e-3}};

TEST(GpuGemm, EveryTransposeAndPrecisionMatchesCpu) {
  GemmContext context;
  for (const Precision& p : kPrecisions) {
    for (const Shape& s : kShapes) {
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          SCOPED_TRACE(testing::Message()
                       << tensor::dtype_name(p.input) << "->" << tensor::dtype_name(p.output)
                       << (p.math == kernels::GemmMath::kTf32 ? " tf32" : "") << " m=" << s.m
                       << " n=" << s.n << " k=" << s.k << " ta=" << ta << " tb=" << tb);
          EXPECT_LE(gemm_error(context, s, ta, tb, p.input, p.output, p.math, 80), p.bound);
        }
      }
    }
  }
}

TEST(GpuGemm, MisalignedViewsWork) {
  // Operands one float past a 256-byte boundary (a strided head view): the alignment
  // preferences must let cuBLASLt pick an algorithm that accepts them.
  GemmContext context;
  const std::int64_t m = 33, n = 65, k = 96;
  const auto a = random_floats(static_cast<std::size_t>(m * k + 1), 81);
  const auto b = random_floats(static_cast<std::size_t>(k * n + 1), 82);
  std::vector<float> ref(static_cast<std::size_t>(m * n + 1), 0.0f);
  ops::cpu::gemm(m, n, k, 1.0f, {a.data() + 1, k, false}, {b.data() + 1, n, false}, 0.0f,
                 ref.data() + 1, n);
  DeviceArray<float> da(a), db(b), dc(std::vector<float>(ref.size(), 0.0f));
  kernels::gemm(context, m, n, k, 1.0f, {da.get() + 1, k, false}, {db.get() + 1, n, false}, 0.0f,
                dc.get() + 1, n, {}, nullptr);
  MDS_EXPECT_CLOSE(dc.download(), ref, 1e-5);
}

TEST(GpuGemm, PlansAreReusedPerShapeAndAlignmentAndFollowEachCallsPointers) {
  // One plan per distinct GEMM: the same shape with new operands and a new bias reuses it (and
  // must read the new bias, the one pointer a plan's descriptor holds); a less aligned view or
  // another shape gets its own.
  GemmContext context;
  const std::int64_t m = 33, n = 65, k = 96;
  const auto x = random_floats(static_cast<std::size_t>(m * k + 1), 92);
  const auto weight = random_floats(static_cast<std::size_t>(n * k), 93);
  const auto bias_a = random_floats(static_cast<std::size_t>(n), 94);
  const auto bias_b = random_floats(static_cast<std::size_t>(n), 95);
  DeviceArray<float> dx(x), dw(weight), dbias_a(bias_a), dbias_b(bias_b);
  const auto check = [&](const float* x_host, const float* x_device, const std::vector<float>& bias,
                         const float* bias_device, std::size_t plans) {
    std::vector<float> ref(static_cast<std::size_t>(m * n));
    ops::cpu::linear_forward(ref.data(), x_host, weight.data(), bias.data(), m, n, k);
    DeviceArray<float> out(static_cast<std::size_t>(m * n));  // poisoned
    kernels::linear_forward(context, out.get(), x_device, dw.get(), bias_device, m, n, k, nullptr);
    MDS_EXPECT_CLOSE(out.download(), ref, 1e-5);
    EXPECT_EQ(context.cached_plans(), plans);
  };
  check(x.data(), dx.get(), bias_a, dbias_a.get(), 1);
  check(x.data(), dx.get(), bias_b, dbias_b.get(), 1);
  check(x.data() + 1, dx.get() + 1, bias_a, dbias_a.get(), 2);  // 4-byte aligned view
  check(x.data() + 1, dx.get() + 1, bias_b, dbias_b.get(), 2);
  std::vector<float> ref_nobias(static_cast<std::size_t>(m * n));
  ops::cpu::linear_forward(ref_nobias.data(), x.data(), weight.data(), nullptr, m, n, k);
  DeviceArray<float> out(static_cast<std::size_t>(m * n));
  kernels::linear_forward(context, out.get(), dx.get(), dw.get(), nullptr, m, n, k, nullptr);
  MDS_EXPECT_CLOSE(out.download(), ref_nobias, 1e-5);
  EXPECT_EQ(context.cached_plans(), 3u);  // no epilogue: another descriptor
}

TEST(GpuGemm, LinearForwardAndBackwardMatchCpu) {
  GemmContext context;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(testing::Message() << "m=" << s.m << " n=" << s.n << " k=" << s.k);
    const auto um = static_cast<std::size_t>(s.m), un = static_cast<std::size_t>(s.n);
    const auto uk = static_cast<std::size_t>(s.k);
    const auto x = random_floats(um * uk, 83, -1.0f, 1.0f);
    const auto weight = random_floats(un * uk, 84, -1.0f, 1.0f);
    const auto bias = random_floats(un, 85), dout = random_floats(um * un, 86);
    std::vector<float> ref(um * un), ref_nobias(um * un);
    ops::cpu::linear_forward(ref.data(), x.data(), weight.data(), bias.data(), s.m, s.n, s.k);
    ops::cpu::linear_forward(ref_nobias.data(), x.data(), weight.data(), nullptr, s.m, s.n, s.k);
    DeviceArray<float> dx_in(x), dw(weight), db(bias), ddout(dout);
    DeviceArray<float> out(um * un), out_nobias(um * un);
    kernels::linear_forward(context, out.get(), dx_in.get(), dw.get(), db.get(), s.m, s.n, s.k,
                            nullptr);
    kernels::linear_forward(context, out_nobias.get(), dx_in.get(), dw.get(), nullptr, s.m, s.n,
                            s.k, nullptr);
    MDS_EXPECT_CLOSE(out.download(), ref, 1e-5);
    MDS_EXPECT_CLOSE(out_nobias.download(), ref_nobias, 1e-5);

    // Gradients accumulate onto non-zero values.
    auto ref_dx = random_floats(um * uk, 87), ref_dw = random_floats(un * uk, 88);
    auto ref_db = random_floats(un, 89);
    DeviceArray<float> gdx(ref_dx), gdw(ref_dw), gdb(ref_db);
    ops::cpu::linear_backward(ref_dx.data(), ref_dw.data(), ref_db.data(), dout.data(), x.data(),
                              weight.data(), s.m, s.n, s.k);
    kernels::ColumnSumScratch scratch;
    kernels::linear_backward(context, gdx.get(), gdw.get(), gdb.get(), ddout.get(), dx_in.get(),
                             dw.get(), s.m, s.n, s.k, scratch, nullptr);
    MDS_EXPECT_CLOSE(gdx.download(), ref_dx, 1e-5);
    MDS_EXPECT_CLOSE(gdw.download(), ref_dw, 1e-5);
    MDS_EXPECT_CLOSE(gdb.download(), ref_db, 1e-5);
  }
}

// An fc1-shaped product for the GeLU epilogues: x [m, k], weight [n, k], bias [n].
struct GeluGemmInputs {
  static constexpr std::int64_t m = 77, n = 3072, k = 768;
  explicit GeluGemmInputs(std::uint32_t seed)
      : x(random_floats(static_cast<std::size_t>(m * k), seed, -0.1f, 0.1f)),
        weight(random_floats(static_cast<std::size_t>(n * k), seed + 1, -0.1f, 0.1f)),
        bias(random_floats(static_cast<std::size_t>(n), seed + 2)) {}
  std::vector<float> x, weight, bias;
};

TEST(GpuGemm, BiasGeluEpilogueIsCloseToCpuGelu) {
  GemmContext context;
  const GeluGemmInputs in(90);
  const std::int64_t m = in.m, n = in.n, k = in.k;
  const auto& [x, weight, bias] = in;
  std::vector<float> pre(static_cast<std::size_t>(m * n)), ref(pre.size());
  ops::cpu::linear_forward(pre.data(), x.data(), weight.data(), nullptr, m, n, k);
  ops::cpu::bias_gelu_forward(ref.data(), pre.data(), bias.data(), m, n,
                              ops::GeluKind::kTanhOpenAI);
  DeviceArray<float> dx(x), dw(weight), db(bias), out(pre.size());
  GemmOptions options;
  options.epilogue = kernels::GemmEpilogue::kBiasGelu;
  options.bias = db.get();
  kernels::gemm(context, m, n, k, 1.0f, {dx.get(), k, false}, {dw.get(), k, true}, 0.0f, out.get(),
                n, options, nullptr);
  // cuBLASLt's tanh approximation is its own (a hardware tanh.approx would be ~5e-4 relative):
  // a bound for "the same function", not for parity with any ops::GeluKind.
  MDS_EXPECT_CLOSE(out.download(), ref, 1e-3);
}

// GELU_AUX_BIAS: the same GeLU output as the kBiasGelu epilogue's bound, and the GeLU input
// (x·Wᵀ + bias) kept in aux: fp32 within 1e-5 of the host's product plus bias; bf16 within its
// rounding (the product may be rounded to 16 bits before the bias, as for kBias).
TEST(GpuGemm, BiasGeluAuxEpilogueKeepsTheGeluInput) {
  GemmContext context;
  const GeluGemmInputs in(98);
  const std::int64_t m = in.m, n = in.n, k = in.k;
  const auto& [x, weight, bias] = in;
  std::vector<float> pre(static_cast<std::size_t>(m * n)), ref(pre.size());
  ops::cpu::linear_forward(pre.data(), x.data(), weight.data(), bias.data(), m, n, k);
  ops::cpu::gelu_forward(ref.data(), pre.data(), static_cast<std::int64_t>(pre.size()),
                         ops::GeluKind::kTanhOpenAI);

  DeviceArray<float> dx(x), dw(weight), db(bias), out(pre.size()), aux(pre.size());
  GemmOptions options;
  options.epilogue = kernels::GemmEpilogue::kBiasGeluAux;
  options.bias = db.get();
  options.aux = aux.get();
  kernels::gemm(context, m, n, k, 1.0f, {dx.get(), k, false}, {dw.get(), k, true}, 0.0f, out.get(),
                n, options, nullptr);
  MDS_EXPECT_CLOSE(aux.download(), pre, 1e-5);
  MDS_EXPECT_CLOSE(out.download(), ref, 1e-3);

  const DType bf16 = DType::kBFloat16;
  DeviceArray<std::uint16_t> hx(bits16(x, bf16)), hw(bits16(weight, bf16)), hb(bits16(bias, bf16));
  DeviceArray<std::uint16_t> hout(pre.size()), haux(pre.size());
  GemmOptions half = options;
  half.input = half.output = bf16;
  half.bias = hb.get();
  half.aux = haux.get();
  kernels::gemm(context, m, n, k, 1.0f, {hx.get(), k, false}, {hw.get(), k, true}, 0.0f, hout.get(),
                n, half, nullptr);
  std::vector<float> pre16(pre.size()), ref16(pre.size());
  const auto x16 = rounded(x, bf16), w16 = rounded(weight, bf16), b16 = rounded(bias, bf16);
  ops::cpu::linear_forward(pre16.data(), x16.data(), w16.data(), b16.data(), m, n, k);
  ops::cpu::gelu_forward(ref16.data(), pre16.data(), static_cast<std::int64_t>(pre16.size()),
                         ops::GeluKind::kTanhOpenAI);
  MDS_EXPECT_CLOSE(from_bits16(haux.download(), bf16), pre16, 1e-2);
  MDS_EXPECT_CLOSE(from_bits16(hout.download(), bf16), ref16, 1e-2);

  options.aux = nullptr;
  EXPECT_THROW(kernels::gemm(context, m, n, k, 1.0f, {dx.get(), k, false}, {dw.get(), k, true},
                             0.0f, out.get(), n, options, nullptr),
               base::Error);
}

TEST(GpuGemm, BatchedMatmulMatchesCpu) {
  GemmContext context;
  const std::int64_t batch = 5, m = 31, n = 17, k = 64;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "ta=" << ta << " tb=" << tb);
      const auto a = random_floats(static_cast<std::size_t>(batch * m * k), 93);
      const auto b = random_floats(static_cast<std::size_t>(batch * k * n), 94);
      auto ref = random_floats(static_cast<std::size_t>(batch * m * n), 95);
      DeviceArray<float> da(a), db(b), dout(ref);
      ops::cpu::batched_matmul(ref.data(), a.data(), b.data(), batch, m, n, k, ta, tb, 0.5f, 0.25f);
      kernels::batched_matmul(context, dout.get(), da.get(), db.get(), batch, m, n, k, ta, tb, 0.5f,
                              0.25f, nullptr);
      MDS_EXPECT_CLOSE(dout.download(), ref, 1e-5);
    }
  }
}

// time_gemm_algorithms (gpu_bench's autotuning probe): a time per offered algorithm, each of
// which computes the product (C written over by the last one, beta = 0, checked against the
// host's fp32 product of the same values), and the context's plan stays the heuristic's choice.
TEST(GpuGemm, TimedAlgorithmsEachComputeTheProduct) {
  GemmContext context;
  const Shape s{200, 96, 64};
  const Matrix a = random_matrix(s.m, s.k, false, 3, 70), b = random_matrix(s.k, s.n, true, 1, 71);
  std::vector<float> ref(static_cast<std::size_t>(s.m * s.n));
  ops::cpu::gemm(s.m, s.n, s.k, 1.0f, {a.values.data(), a.ld, false}, {b.values.data(), b.ld, true},
                 0.0f, ref.data(), s.n);
  DeviceArray<float> da(a.values), db(b.values), dc(std::vector<float>(ref.size(), NAN));
  GemmOptions options;
  const std::vector<float> times = kernels::time_gemm_algorithms(
      context, s.m, s.n, s.k, 1.0f, {da.get(), a.ld, false}, {db.get(), b.ld, true}, 0.0f, dc.get(),
      s.n, options, 4, 2, nullptr);
  ASSERT_GE(times.size(), 1u);
  EXPECT_LE(times.size(), 4u);
  for (const float ms : times) EXPECT_GT(ms, 0.0f);
  MDS_EXPECT_CLOSE(dc.download(), ref, 1e-5);
  EXPECT_EQ(context.cached_plans(), 1u);
  std::printf("%zu algorithms offered, first %.4f ms\n", times.size(), times.front());
}

// GemmContext::set_algorithm_choices (pretrain --gemm-tuning-file): the first call of a GEMM
// that accumulates (beta = 1) times the candidates on a copy of C's old values, so the result is
// still C + A·B (checked against the host's fp32 product); the file then holds that one choice,
// and a second context reading it makes the same one: the same bits.
TEST(GpuGemm, TuningFileChoicesKeepCAndRepeatTheirBits) {
  const Shape s{200, 96, 64};
  const Matrix a = random_matrix(s.m, s.k, false, 3, 72), b = random_matrix(s.k, s.n, true, 1, 73);
  std::vector<float> ref(static_cast<std::size_t>(s.m * s.n), 0.5f);
  ops::cpu::gemm(s.m, s.n, s.k, 1.0f, {a.values.data(), a.ld, false}, {b.values.data(), b.ld, true},
                 1.0f, ref.data(), s.n);
  const std::string path =
      ::testing::TempDir() + "/mds-gemm-tuning-" + std::to_string(::getpid()) + ".txt";
  std::remove(path.c_str());
  DeviceArray<float> da(a.values), db(b.values);
  const auto run = [&] {
    GemmContext context;
    ops::GemmTuningFile choices(path, kernels::gemm_platform());
    context.set_algorithm_choices(&choices);
    DeviceArray<float> dc(std::vector<float>(ref.size(), 0.5f));
    kernels::gemm(context, s.m, s.n, s.k, 1.0f, {da.get(), a.ld, false}, {db.get(), b.ld, true},
                  1.0f, dc.get(), s.n, {}, nullptr);
    return dc.download();
  };
  const std::vector<float> tuned = run();
  MDS_EXPECT_CLOSE(tuned, ref, 1e-5);
  EXPECT_EQ(ops::GemmTuningFile(path, kernels::gemm_platform()).size(), 1u);
  EXPECT_EQ(run(), tuned);
  std::remove(path.c_str());
}

TEST(GpuGemm, RepeatsBitForBit) {
  // A long k (split-K territory) at fp32 and bf16: the same algorithm, the same bits.
  GemmContext context;
  const std::int64_t m = 128, n = 768, k = 16384;
  const auto a = random_floats(static_cast<std::size_t>(m * k), 96);
  const auto b = random_floats(static_cast<std::size_t>(k * n), 97);
  DeviceArray<float> da(a), db(b);
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    DeviceArray<float> c(static_cast<std::size_t>(m * n));
    kernels::gemm(context, m, n, k, 1.0f, {da.get(), k, false}, {db.get(), n, false}, 0.0f, c.get(),
                  n, {}, nullptr);
    const auto got = c.download();
    if (run == 0) first = got;
    EXPECT_EQ(gpu_test::non_finite(got), 0u);
    EXPECT_EQ(got, first);
  }
  DeviceArray<std::uint16_t> ha(bits16(a, DType::kBFloat16)), hb(bits16(b, DType::kBFloat16));
  GemmOptions bf16;
  bf16.input = bf16.output = DType::kBFloat16;
  std::vector<std::uint16_t> first16;
  for (int run = 0; run < 3; ++run) {
    DeviceArray<std::uint16_t> c(static_cast<std::size_t>(m * n));
    kernels::gemm(context, m, n, k, 1.0f, {ha.get(), k, false}, {hb.get(), n, false}, 0.0f, c.get(),
                  n, bf16, nullptr);
    const auto got = c.download();
    if (run == 0) first16 = got;
    EXPECT_EQ(got, first16);
  }
}

TEST(GpuGemm, RejectsUnsupportedCombinations) {
  GemmContext context;
  DeviceArray<float> a(16), b(16), c(16);
  GemmOptions tf32_bf16;
  tf32_bf16.input = tf32_bf16.output = DType::kBFloat16;
  tf32_bf16.math = kernels::GemmMath::kTf32;
  EXPECT_THROW(kernels::gemm(context, 4, 4, 4, 1.0f, {a.get(), 4, false}, {b.get(), 4, false}, 0.0f,
                             c.get(), 4, tf32_bf16, nullptr),
               base::Error);
  GemmOptions narrowing;
  narrowing.output = DType::kBFloat16;  // fp32 inputs writing bf16
  EXPECT_THROW(kernels::gemm(context, 4, 4, 4, 1.0f, {a.get(), 4, false}, {b.get(), 4, false}, 0.0f,
                             c.get(), 4, narrowing, nullptr),
               base::Error);
  GemmOptions mixed;
  mixed.input = DType::kBFloat16;
  mixed.output = DType::kFloat16;
  EXPECT_THROW(kernels::gemm(context, 4, 4, 4, 1.0f, {a.get(), 4, false}, {b.get(), 4, false}, 0.0f,
                             c.get(), 4, mixed, nullptr),
               base::Error);
}

}  // namespace
}  // namespace mds
