// The ops that take a model's non-GEMM parameters (LayerNorm weight and bias, the biases of
// bias-GeLU and bias-dropout-add, the embedding tables) and the sums of squares of the parameter
// norm, given those parameters in the activations' 16-bit dtype (how a 16-bit model keeps them,
// without an fp32 copy) on the host: every output, fp32 statistics and parameter gradients
// included, must be bit for bit what the same op gives with the parameters widened to fp32; the
// dtype rule's refusals are one line each.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/gradients.h"
#include "ops/layernorm.h"
#include "ops_16bit_util.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::Half;
using ops_test::view;
using tensor::Shape;

struct Rows {
  std::int64_t rows, cols;
};
const std::vector<Rows> kShapes = {{1, 1}, {3, 5}, {2, 257}, {5, 300}};

template <typename T>
std::vector<std::uint16_t> bits(const std::vector<T>& v) {
  std::vector<std::uint16_t> out;
  for (const T x : v) out.push_back(x.bits);
  return out;
}

template <typename T>
class Ops16BitParams : public ::testing::Test {};
using HalfTypes = ::testing::Types<tensor::BFloat16, tensor::Float16>;
TYPED_TEST_SUITE(Ops16BitParams, HalfTypes);

TYPED_TEST(Ops16BitParams, LayerNormEqualsTheWidenedParams) {
  using T = TypeParam;
  for (const auto [rows, cols] : kShapes) {
    const auto n = static_cast<std::size_t>(rows * cols);
    const auto c = static_cast<std::size_t>(cols), r = static_cast<std::size_t>(rows);
    const Shape shape{rows, cols}, row{cols}, stat{rows};
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    Half<T> x(n, 1), dout(n, 2), weight(c, 3, 0.5f, 1.5f), bias(c, 4);
    Half<T> out16(n, 5), out32(n, 5), dx16(n, 6), dx32(n, 6);
    std::vector<float> mean16(r), rstd16(r), mean32(r), rstd32(r);
    layernorm_forward(out16.t(shape), view(mean16, stat), view(rstd16, stat), x.t(shape),
                      weight.t(row), bias.t(row), 1e-5f);
    layernorm_forward(out32.t(shape), view(mean32, stat), view(rstd32, stat), x.t(shape),
                      weight.f(row), bias.f(row), 1e-5f);
    EXPECT_EQ(bits(out16.low), bits(out32.low)) << what;
    EXPECT_EQ(mean16, mean32) << what;
    EXPECT_EQ(rstd16, rstd32) << what;

    auto dweight16 = ops_test::random_floats(c, 7), dbias16 = ops_test::random_floats(c, 8);
    auto dweight32 = dweight16, dbias32 = dbias16;
    layernorm_backward(dx16.t(shape), view(dweight16, row), view(dbias16, row), dout.t(shape),
                       x.t(shape), weight.t(row), view(mean32, stat), view(rstd32, stat));
    layernorm_backward(dx32.t(shape), view(dweight32, row), view(dbias32, row), dout.t(shape),
                       x.t(shape), weight.f(row), view(mean32, stat), view(rstd32, stat));
    EXPECT_EQ(bits(dx16.low), bits(dx32.low)) << what;
    EXPECT_EQ(dweight16, dweight32) << what;
    EXPECT_EQ(dbias16, dbias32) << what;
  }
}

TYPED_TEST(Ops16BitParams, BiasGeluEqualsTheWidenedBias) {
  using T = TypeParam;
  for (const GeluKind kind : {GeluKind::kTanhFused, GeluKind::kTanhOpenAI, GeluKind::kErf}) {
    for (const auto [rows, cols] : kShapes) {
      const auto n = static_cast<std::size_t>(rows * cols);
      const auto c = static_cast<std::size_t>(cols);
      const Shape shape{rows, cols}, row{cols};
      const std::string what = std::to_string(static_cast<int>(kind)) + " " + std::to_string(rows) +
                               "x" + std::to_string(cols);
      Half<T> x(n, 10), dout(n, 11), bias(c, 12), out16(n, 13), out32(n, 13);
      bias_gelu_forward(out16.t(shape), x.t(shape), bias.t(row), kind);
      bias_gelu_forward(out32.t(shape), x.t(shape), bias.f(row), kind);
      EXPECT_EQ(bits(out16.low), bits(out32.low)) << what;

      Half<T> dx16(n, 14), dx32(n, 14);
      auto dbias16 = ops_test::random_floats(c, 15);
      auto dbias32 = dbias16;
      bias_gelu_backward(dx16.t(shape), view(dbias16, row), dout.t(shape), x.t(shape), bias.t(row),
                         kind);
      bias_gelu_backward(dx32.t(shape), view(dbias32, row), dout.t(shape), x.t(shape), bias.f(row),
                         kind);
      EXPECT_EQ(bits(dx16.low), bits(dx32.low)) << what;
      EXPECT_EQ(dbias16, dbias32) << what;
      bias_gelu_backward(dx16.t(shape), {}, dout.t(shape), x.t(shape), bias.t(row), kind);
      bias_gelu_backward(dx32.t(shape), {}, dout.t(shape), x.t(shape), bias.f(row), kind);
      EXPECT_EQ(bits(dx16.low), bits(dx32.low)) << what << " without dbias";
    }
  }
}

TYPED_TEST(Ops16BitParams, BiasDropoutAddEqualsTheWidenedBias) {
  using T = TypeParam;
  for (const DropoutStream stream : {DropoutStream{0.3f, 1234, 56}, DropoutStream{0.0f, 7, 0}}) {
    for (const auto [rows, cols] : kShapes) {
      const auto n = static_cast<std::size_t>(rows * cols);
      const Shape shape{rows, cols}, row{cols};
      const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
      Half<T> x(n, 20), residual(n, 21), bias(static_cast<std::size_t>(cols), 22);
      Half<T> out16(n, 23), out32(n, 23);
      bias_dropout_add_forward(out16.t(shape), x.t(shape), bias.t(row), residual.t(shape), stream);
      bias_dropout_add_forward(out32.t(shape), x.t(shape), bias.f(row), residual.t(shape), stream);
      EXPECT_EQ(bits(out16.low), bits(out32.low)) << what << " p=" << stream.p;
    }
  }
}

TYPED_TEST(Ops16BitParams, EmbeddingEqualsTheWidenedTables) {
  using T = TypeParam;
  constexpr std::int64_t kV = 11, kP = 6;
  for (const std::int64_t h : {1, 5, 257}) {
    std::vector<std::int64_t> ids{10, 0, 3, 3, 7, 10, 2}, places{0, 1, 2, 3, 4, 5, 0};
    const auto n = static_cast<std::int64_t>(ids.size());
    const Shape shape{n, h}, tokens{n};
    const auto count = static_cast<std::size_t>(n * h);
    const std::string what = "h=" + std::to_string(h);
    Half<T> wte(static_cast<std::size_t>(kV * h), 30), wpe(static_cast<std::size_t>(kP * h), 31);
    // A shard holding ids [4, 9): the others give zeros.
    Half<T> shard(static_cast<std::size_t>(5 * h), 32);
    Half<T> out16(count, 33), out32(count, 33);
    embedding_lookup(out16.t(shape), view(ids, tokens), shard.t({5, h}), 4, kV);
    embedding_lookup(out32.t(shape), view(ids, tokens), shard.f({5, h}), 4, kV);
    EXPECT_EQ(bits(out16.low), bits(out32.low)) << "lookup " << what;
    embedding_lookup_add(out16.t(shape), view(places, tokens), wpe.t({kP, h}));
    embedding_lookup_add(out32.t(shape), view(places, tokens), wpe.f({kP, h}));
    EXPECT_EQ(bits(out16.low), bits(out32.low)) << "lookup_add " << what;
    embedding_forward(out16.t(shape), view(ids, tokens), wte.t({kV, h}), view(places, tokens),
                      wpe.t({kP, h}));
    embedding_forward(out32.t(shape), view(ids, tokens), wte.f({kV, h}), view(places, tokens),
                      wpe.f({kP, h}));
    EXPECT_EQ(bits(out16.low), bits(out32.low)) << "forward " << what;
    // fp32 activations read fp32 tables only; with fp32 out, the lookup of the widened table is
    // what a 16-bit out rounds.
    std::vector<float> wide(count);
    embedding_lookup(view(wide, shape), view(ids, tokens), wte.f({kV, h}));
    embedding_lookup(out16.t(shape), view(ids, tokens), wte.t({kV, h}));
    ops_test::expect_rounded(out16.low, wide, "lookup of the whole table " + what);
  }
}

TYPED_TEST(Ops16BitParams, SumsOfSquaresEqualThoseOfTheWidenedWeights) {
  using T = TypeParam;
  constexpr std::int64_t kN = 5000;
  Half<T> x(static_cast<std::size_t>(kN), 40);
  const std::vector<SquaresSegment> segments = {{0, kN}, {7, 0}, {63, 1}, {101, 513}, {3, 4099}};
  const std::vector<double> got = sums_of_squares(DeviceContext{}, x.t({kN}), segments);
  const std::vector<double> want = sums_of_squares(DeviceContext{}, x.f({kN}), segments);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(double)), 0);
  EXPECT_GT(want[0], 0.0);
}

void expect_one_line_failure(const std::function<void()>& call, const std::string& message) {
  try {
    call();
    FAIL() << "expected: " << message;
  } catch (const base::Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(Ops16BitParams, ParametersMustBeFp32OrTheActivationDtype) {
  Half<tensor::BFloat16> x(4, 1), w16(4, 2), table16(8, 3);
  Half<tensor::Float16> half(4, 4), table_half(8, 5);
  std::vector<float> f(4), stats(1), params(4), table(8);
  std::vector<std::int64_t> ids{0};
  const Shape shape{1, 4}, row{4};
  expect_one_line_failure(
      [&] {
        layernorm_forward(x.t(shape), view(stats, {1}), view(stats, {1}), x.t(shape), half.t(row),
                          half.t(row), 1e-5f);
      },
      "ops::layernorm_forward: weight must be float32 or x's dtype bfloat16, got float16");
  expect_one_line_failure(
      [&] {
        layernorm_forward(x.t(shape), view(stats, {1}), view(stats, {1}), x.t(shape), w16.t(row),
                          view(params, row), 1e-5f);
      },
      "ops::layernorm_forward: bias must have weight's dtype bfloat16, got float32");
  expect_one_line_failure(
      [&] {
        layernorm_backward(view(f, shape), {}, {}, view(f, shape), view(f, shape), w16.t(row),
                           view(stats, {1}), view(stats, {1}));
      },
      "ops::layernorm_backward: weight must be float32, got bfloat16");
  expect_one_line_failure([&] { bias_gelu_forward(x.t(shape), x.t(shape), half.t(row)); },
                          "ops::bias_gelu_forward: bias must be float32 or x's dtype bfloat16, got "
                          "float16");
  expect_one_line_failure(
      [&] {
        bias_dropout_add_forward(view(f, shape), view(f, shape), w16.t(row), view(f, shape),
                                 DropoutStream{});
      },
      "ops::bias_dropout_add_forward: bias must be float32, got bfloat16");
  expect_one_line_failure(
      [&] {
        embedding_lookup(x.t(shape), view(ids, {1}), table_half.t({2, 4}));
      },
      "ops::embedding_lookup: table must be float32 or out's dtype bfloat16, got float16");
  expect_one_line_failure(
      [&] {
        embedding_forward(x.t(shape), view(ids, {1}), table16.t({2, 4}), view(ids, {1}),
                          view(table, {2, 4}));
      },
      "ops::embedding_forward: wpe must have wte's dtype bfloat16, got float32");
  expect_one_line_failure(
      [&] {
        embedding_backward(table16.t({2, 4}), x.t(shape), view(ids, {1}));
      },
      "ops::embedding_backward: dtable must be float32, got bfloat16");
  std::vector<std::int64_t> ints(4);
  expect_one_line_failure(
      [&] { sums_of_squares(DeviceContext{}, view(ints, {4}), std::vector<SquaresSegment>{}); },
      "ops::sums_of_squares: x must be fp32, bf16 or fp16, got int64");
}

}  // namespace
}  // namespace mds::ops
