// The 16-bit linear layers and batched products on the host: each on bf16/fp16 activations and
// weights must equal the fp32 op on the widened inputs followed by one rounding of each 16-bit
// output, bit for bit (dx included, which is widened, added to in fp32 and rounded once); the fp32
// dweight and dbias must equal the fp32 op's exactly; dtype mixes fail with one line.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "ops/matmul.h"
#include "ops_16bit_util.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_rounded;
using ops_test::Half;
using ops_test::random_floats;
using ops_test::view;
using tensor::Shape;

struct Sizes {
  std::int64_t m, n, k;
};
// One element, odd sizes, and a k long enough for OpenBLAS to split it.
const std::vector<Sizes> kSizes = {{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {6, 257, 300}};

std::string name(const Sizes& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

template <typename T>
class Matmul16Bit : public ::testing::Test {};
using HalfTypes = ::testing::Types<tensor::BFloat16, tensor::Float16>;
TYPED_TEST_SUITE(Matmul16Bit, HalfTypes);

TYPED_TEST(Matmul16Bit, LinearForwardRoundsTheFp32ResultOnce) {
  using T = TypeParam;
  for (const Sizes s : kSizes) {
    const auto [m, n, k] = s;
    const auto un = static_cast<std::size_t>(n);
    Half<T> x(static_cast<std::size_t>(m * k), 1), weight(static_cast<std::size_t>(n * k), 2);
    Half<T> bias(un, 3), out(static_cast<std::size_t>(m * n), 4);
    std::vector<float> want(static_cast<std::size_t>(m * n));
    linear_forward(view(want, {m, n}), x.f({m, k}), weight.f({n, k}), bias.f({n}));
    linear_forward(out.t({m, n}), x.t({m, k}), weight.t({n, k}), bias.t({n}));
    expect_rounded(out.low, want, "with bias " + name(s));
    linear_forward(view(want, {m, n}), x.f({m, k}), weight.f({n, k}));
    linear_forward(out.t({m, n}), x.t({m, k}), weight.t({n, k}));
    expect_rounded(out.low, want, "without bias " + name(s));
  }
}

TYPED_TEST(Matmul16Bit, LinearForwardTakesLeadingDims) {
  using T = TypeParam;
  Half<T> x(2 * 3 * 5, 5), weight(7 * 5, 6), bias(7, 7), out(2 * 3 * 7, 8);
  std::vector<float> want(2 * 3 * 7);
  linear_forward(view(want, {2, 3, 7}), x.f({2, 3, 5}), weight.f({7, 5}), bias.f({7}));
  linear_forward(out.t({2, 3, 7}), x.t({2, 3, 5}), weight.t({7, 5}), bias.t({7}));
  expect_rounded(out.low, want, "[2, 3, 5] x [7, 5]");
}

TYPED_TEST(Matmul16Bit, LinearBackwardAccumulatesOntoNonZeroGradients) {
  using T = TypeParam;
  for (const Sizes s : kSizes) {
    const auto [m, n, k] = s;
    const auto mk = static_cast<std::size_t>(m * k), nk = static_cast<std::size_t>(n * k);
    Half<T> x(mk, 9), weight(nk, 10), dout(static_cast<std::size_t>(m * n), 11), dx(mk, 12);
    auto dweight = random_floats(nk, 13), dbias = random_floats(static_cast<std::size_t>(n), 14);
    auto dweight16 = dweight, dbias16 = dbias;
    linear_backward(dx.f({m, k}), view(dweight, {n, k}), view(dbias, {n}), dout.f({m, n}),
                    x.f({m, k}), weight.f({n, k}));
    linear_backward(dx.t({m, k}), view(dweight16, {n, k}), view(dbias16, {n}), dout.t({m, n}),
                    x.t({m, k}), weight.t({n, k}));
    expect_rounded(dx.low, dx.wide, "dx " + name(s));
    EXPECT_EQ(dweight16, dweight) << name(s);
    EXPECT_EQ(dbias16, dbias) << name(s);

    // Each gradient alone.
    dx.sync();
    linear_backward(dx.f({m, k}), {}, {}, dout.f({m, n}), x.f({m, k}), weight.f({n, k}));
    linear_backward(dx.t({m, k}), {}, {}, dout.t({m, n}), x.t({m, k}), weight.t({n, k}));
    expect_rounded(dx.low, dx.wide, "dx alone " + name(s));
    linear_backward({}, view(dweight, {n, k}), {}, dout.f({m, n}), x.f({m, k}), weight.f({n, k}));
    linear_backward({}, view(dweight16, {n, k}), {}, dout.t({m, n}), x.t({m, k}), weight.t({n, k}));
    EXPECT_EQ(dweight16, dweight) << "dweight alone " << name(s);
  }
}

// Dx::kOverwrite: dx is the product alone, rounded once; a NaN left in dx does not reach it;
// dweight and dbias still accumulate.
TYPED_TEST(Matmul16Bit, LinearBackwardOverwritesDxWhenAsked) {
  using T = TypeParam;
  for (const Sizes s : kSizes) {
    const auto [m, n, k] = s;
    const auto mk = static_cast<std::size_t>(m * k), nk = static_cast<std::size_t>(n * k);
    Half<T> x(mk, 9), weight(nk, 10), dout(static_cast<std::size_t>(m * n), 11), dx(mk, 12);
    auto dweight = random_floats(nk, 13), dweight16 = dweight;
    std::vector<float> want(mk, 0.0f);
    linear_backward(view(want, {m, k}), view(dweight, {n, k}), {}, dout.f({m, n}), x.f({m, k}),
                    weight.f({n, k}));
    for (T& v : dx.low) v = T{0xFFFF};
    linear_backward(dx.t({m, k}), view(dweight16, {n, k}), {}, dout.t({m, n}), x.t({m, k}),
                    weight.t({n, k}), Dx::kOverwrite);
    expect_rounded(dx.low, want, "dx over NaN " + name(s));
    EXPECT_EQ(dweight16, dweight) << name(s);
    // The weight's gradient written over NaNs: what adding into zeros gives.
    std::vector<float> added(nk, 0.0f), written(nk, std::nanf(""));
    linear_backward({}, view(added, {n, k}), {}, dout.t({m, n}), x.t({m, k}), weight.t({n, k}));
    linear_backward({}, view(written, {n, k}), {}, dout.t({m, n}), x.t({m, k}), weight.t({n, k}),
                    Dx::kAccumulate, Dx::kOverwrite);
    EXPECT_EQ(written, added) << name(s);
  }
}

TYPED_TEST(Matmul16Bit, BatchedMatmulEveryTransposeAlphaBeta) {
  using T = TypeParam;
  constexpr std::int64_t kB = 3, kM = 5, kN = 9, kK = 33;
  const auto count = static_cast<std::size_t>(kB * kM * kN);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const std::string what = std::string(ta ? "T" : "N") + (tb ? "T" : "N");
      const Shape a_shape = ta ? Shape{kB, kK, kM} : Shape{kB, kM, kK};
      const Shape b_shape = tb ? Shape{kB, kN, kK} : Shape{kB, kK, kN};
      Half<T> a(static_cast<std::size_t>(kB * kM * kK), 15),
          b(static_cast<std::size_t>(kB * kK * kN), 16);
      Half<T> out(count, 17);
      batched_matmul(view(out.wide, {kB, kM, kN}), a.f(a_shape), b.f(b_shape), ta, tb, 0.5f, 0.25f);
      batched_matmul(out.t({kB, kM, kN}), a.t(a_shape), b.t(b_shape), ta, tb, 0.5f, 0.25f);
      expect_rounded(out.low, out.wide, "alpha 0.5, beta 0.25 " + what);

      // beta = 0 overwrites: a NaN left in out must not reach the result.
      std::vector<float> want(count);
      for (T& v : out.low) v = T{0xFFFF};
      batched_matmul(view(want, {kB, kM, kN}), a.f(a_shape), b.f(b_shape), ta, tb);
      batched_matmul(out.t({kB, kM, kN}), a.t(a_shape), b.t(b_shape), ta, tb);
      expect_rounded(out.low, want, "beta 0 over NaN " + what);
    }
  }
}

void expect_one_line_failure(const std::function<void()>& call, const std::string& needle) {
  try {
    call();
    FAIL() << "expected a failure mentioning " << needle;
  } catch (const base::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(needle), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(Matmul16Bit, DtypeMixesFailWithOneLine) {
  Half<tensor::BFloat16> bf(4, 1), bias(2, 2);
  Half<tensor::Float16> fp(4, 3);
  std::vector<float> f(4), fb(2);
  std::vector<std::int64_t> ints(4);
  const Shape x_shape{2, 2}, w_shape{2, 2};
  expect_one_line_failure([&] { linear_forward(bf.t(x_shape), bf.t(x_shape), fp.t(w_shape)); },
                          "ops::linear_forward: weight must have x's dtype bfloat16, got float16");
  expect_one_line_failure([&] { linear_forward(view(f, x_shape), bf.t(x_shape), bf.t(w_shape)); },
                          "ops::linear_forward: out must have x's dtype bfloat16, got float32");
  expect_one_line_failure(
      [&] { linear_forward(bf.t(x_shape), bf.t(x_shape), bf.t(w_shape), view(fb, {2})); },
      "ops::linear_forward: bias must have x's dtype bfloat16, got float32");
  expect_one_line_failure(
      [&] { linear_forward(view(ints, x_shape), view(ints, x_shape), view(ints, w_shape)); },
      "ops::linear_forward: x must be float32, bfloat16 or float16, got int64");
  expect_one_line_failure(
      [&] { linear_backward(fp.t(x_shape), {}, {}, bf.t(x_shape), bf.t(x_shape), bf.t(w_shape)); },
      "ops::linear_backward: dx must have dout's dtype bfloat16, got float16");
  expect_one_line_failure(
      [&] { linear_backward({}, bf.t(w_shape), {}, bf.t(x_shape), bf.t(x_shape), bf.t(w_shape)); },
      "ops::linear_backward: dweight must be float32, got bfloat16");
  expect_one_line_failure(
      [&] { linear_backward({}, {}, bias.t({2}), bf.t(x_shape), bf.t(x_shape), bf.t(w_shape)); },
      "ops::linear_backward: dbias must be float32, got bfloat16");
  expect_one_line_failure(
      [&] {
        batched_matmul(view(f, {1, 2, 2}), bf.t({1, 2, 2}), bf.t({1, 2, 2}), false, false);
      },
      "ops::batched_matmul: out must have a's dtype bfloat16, got float32");
  expect_one_line_failure(
      [&] {
        batched_matmul(bf.t({1, 2, 2}), bf.t({1, 2, 2}), fp.t({1, 2, 2}), false, false);
      },
      "ops::batched_matmul: b must have a's dtype bfloat16, got float16");
}

}  // namespace
}  // namespace mds::ops
