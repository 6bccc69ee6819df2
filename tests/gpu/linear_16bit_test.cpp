// The bf16/fp16 linear layers and batched products on a device (cuBLASLt with 16-bit operands,
// fp32 accumulation) against the same ops on host tensors, their CPU twins (the fp32 OpenBLAS
// product on the widened values, rounded once; the unit tests tie them to the fp32 ops). 16-bit
// outputs start poisoned (NaN) unless the op accumulates into them.
//
// Bound: a product of two bf16 (8-bit significands) or two fp16 values (11 bits) is exact in fp32,
// so host and device sum the same k exact terms in fp32 and differ only by the summation order
// (cuBLASLt's tiles and split-K, OpenBLAS's blocking; split-K partials stay fp32,
// kernels/gemm_plan.cu). For the random-sign terms here that difference grows like
// √k · 2⁻²⁴ · rms(result): under 4e-6·rms for k ≤ 4096, far below half a bf16 (2⁻⁹) or fp16 (2⁻¹²)
// ulp of a result of typical size. So the roundings of the two fp32 sums are at most one 16-bit
// ulp apart, except near zero (cancellation), where the 16-bit ulp shrinks below the fp32
// difference: there the absolute 1e-4·rms(reference) floor of expect_one_ulp applies, still 25×
// the expected difference. dweight and dbias are fp32 and keep the fp32 GEMM tests' bound.
// A product that ends with an addition (the bias, dx's accumulation) is checked against its terms
// instead (expect_within_term_ulps): on an H100 some cuBLASLt algorithms round the product, or
// parts of it, to 16 bits before they add.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "tests/gpu/device_tensors.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/half_util.h"

namespace mds {
namespace {

using gpu_test::expect_one_ulp;
using gpu_test::expect_within_term_ulps;
using gpu_test::halves;
using gpu_test::Mirrored;
using gpu_test::poisoned;
using gpu_test::random_floats;
using ops::DeviceContext;
using tensor::Shape;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};

struct Sizes {
  std::int64_t m, n, k;
};
// Odd sizes, GPT-2 124M's MLP projections (768 → 3072 → 768) and a long k.
const std::vector<Sizes> kSizes = {{1, 1, 1},       {3, 5, 7},       {17, 33, 65}, {257, 129, 1000},
                                   {64, 3072, 768}, {96, 768, 3072}, {8, 64, 4096}};

std::string name(const Sizes& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

std::size_t count(std::int64_t rows, std::int64_t cols) {
  return static_cast<std::size_t>(rows * cols);
}

template <typename T>
class Linear16OnDevice : public ::testing::Test {};
using gpu_test::HalfTypes;
TYPED_TEST_SUITE(Linear16OnDevice, HalfTypes);

TYPED_TEST(Linear16OnDevice, ForwardWithAndWithoutBias) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  for (const Sizes s : kSizes) {
    const auto [m, n, k] = s;
    // Inputs of about unit size, so results have rms √k/3 and stay well inside fp16's range.
    Mirrored<T> x(ctx, halves<T>(count(m, k), 1, -1.0f, 1.0f), {m, k});
    Mirrored<T> weight(ctx, halves<T>(count(n, k), 2, -1.0f, 1.0f), {n, k});
    Mirrored<T> bias(ctx, halves<T>(count(1, n), 3), {n});
    Mirrored<T> plain(ctx, poisoned<T>(count(m, n)), {m, n});
    ops::linear_forward(plain.h, x.h, weight.h);
    ops::linear_forward(ctx, plain.d, x.d, weight.d);
    expect_one_ulp(ctx, plain, "without bias " + name(s));
    Mirrored<T> out(ctx, poisoned<T>(count(m, n)), {m, n});
    ops::linear_forward(out.h, x.h, weight.h, bias.h);
    ops::linear_forward(ctx, out.d, x.d, weight.d, bias.d);
    expect_within_term_ulps(ctx, out, plain.host, bias.host, count(1, n), "with bias " + name(s));
  }
}

TYPED_TEST(Linear16OnDevice, BackwardAccumulatesIntoEveryGradientOrOverwritesDx) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  for (const Sizes s : kSizes) {
    const auto [m, n, k] = s;
    Mirrored<T> x(ctx, halves<T>(count(m, k), 4, -1.0f, 1.0f), {m, k});
    Mirrored<T> weight(ctx, halves<T>(count(n, k), 5, -1.0f, 1.0f), {n, k});
    Mirrored<T> dout(ctx, halves<T>(count(m, n), 6, -1.0f, 1.0f), {m, n});
    Mirrored<T> dx(ctx, halves<T>(count(m, k), 7), {m, k});
    Mirrored<float> dweight(ctx, random_floats(count(n, k), 8), {n, k});
    Mirrored<float> dbias(ctx, random_floats(count(1, n), 9), {n});
    // dout·weight alone, rounded: the product term of the accumulated dx.
    std::vector<T> product(count(m, k), T{0});
    ops::linear_backward(tensor::Tensor(product.data(), tensor::dtype_of<T>(), {m, k}), {}, {},
                         dout.h, x.h, weight.h);
    const std::vector<T> dx0 = dx.host;
    ops::linear_backward(dx.h, dweight.h, dbias.h, dout.h, x.h, weight.h);
    ops::linear_backward(ctx, dx.d, dweight.d, dbias.d, dout.d, x.d, weight.d);
    expect_within_term_ulps(ctx, dx, product, dx0, dx0.size(), "dx " + name(s));
    SCOPED_TRACE(name(s));
    EXPECT_FP32_CLOSE(ctx, dweight, 1e-5);
    EXPECT_FP32_CLOSE(ctx, dbias, 1e-5);
    // Dx::kOverwrite (beta = 0, the model's scratch gradients): the product alone, within one ulp
    // of the host's once-rounded value over a poisoned dx; dweight still accumulates.
    Mirrored<T> overwritten(ctx, poisoned<T>(count(m, k)), {m, k});
    ops::linear_backward(overwritten.h, dweight.h, {}, dout.h, x.h, weight.h, ops::Dx::kOverwrite);
    ops::linear_backward(ctx, overwritten.d, dweight.d, {}, dout.d, x.d, weight.d,
                         ops::Dx::kOverwrite);
    expect_one_ulp(ctx, overwritten, "overwritten dx " + name(s));
    EXPECT_FP32_CLOSE(ctx, dweight, 1e-5);
    // The weight's gradient with beta = 0 over NaNs (the model's GradientWrite::kOverwrite).
    Mirrored<float> written(ctx, std::vector<float>(count(n, k), std::nanf("")), {n, k});
    ops::fill(written.h, 0.0f);  // the host adds into zeros
    ops::linear_backward({}, written.h, {}, dout.h, x.h, weight.h);
    ops::linear_backward(ctx, {}, written.d, {}, dout.d, x.d, weight.d, ops::Dx::kAccumulate,
                         ops::Dx::kOverwrite);
    EXPECT_FP32_CLOSE(ctx, written, 1e-5);
  }
}

TYPED_TEST(Linear16OnDevice, BatchedMatmulEveryTransposeAlphaBeta) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  // Odd sizes, and attention's scores q·kᵀ and P·V for 24 heads of 64 over 128 positions.
  struct Batched {
    std::int64_t batch, m, n, k;
  };
  for (const Batched s :
       {Batched{3, 5, 9, 33}, Batched{24, 128, 128, 64}, Batched{24, 128, 64, 128}}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        const std::string what = std::to_string(s.batch) + "x" + std::to_string(s.m) + "x" +
                                 std::to_string(s.n) + "x" + std::to_string(s.k) +
                                 (ta ? " T" : " N") + (tb ? "T" : "N");
        const Shape a_shape = ta ? Shape{s.batch, s.k, s.m} : Shape{s.batch, s.m, s.k};
        const Shape b_shape = tb ? Shape{s.batch, s.n, s.k} : Shape{s.batch, s.k, s.n};
        const Shape out_shape{s.batch, s.m, s.n};
        const auto out_count = static_cast<std::size_t>(s.batch * s.m * s.n);
        Mirrored<T> a(ctx, halves<T>(static_cast<std::size_t>(s.batch * s.m * s.k), 10), a_shape);
        Mirrored<T> b(ctx, halves<T>(static_cast<std::size_t>(s.batch * s.k * s.n), 11), b_shape);
        Mirrored<T> out(ctx, poisoned<T>(out_count), out_shape);
        ops::batched_matmul(out.h, a.h, b.h, ta, tb);
        ops::batched_matmul(ctx, out.d, a.d, b.d, ta, tb);
        expect_one_ulp(ctx, out, "beta 0 " + what);
        // Accumulating onto equal values: beta on a 16-bit C.
        tensor::copy(out.d, out.h);
        ops::batched_matmul(out.h, a.h, b.h, ta, tb, 0.5f, 0.25f);
        ops::batched_matmul(ctx, out.d, a.d, b.d, ta, tb, 0.5f, 0.25f);
        expect_one_ulp(ctx, out, "alpha 0.5 beta 0.25 " + what);
      }
    }
  }
}

}  // namespace
}  // namespace mds
