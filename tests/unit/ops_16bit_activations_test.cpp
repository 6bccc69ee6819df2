// The 16-bit activation variants on the host: each op on bf16/fp16 activations must equal the
// fp32 op on the widened inputs followed by one rounding of each output, bit for bit; fp32
// parameter gradients and statistics must equal the fp32 op's exactly; dtype mixes fail with
// one line.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops_16bit_util.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_rounded;
using ops_test::Half;
using ops_test::random_floats;
using ops_test::view;
using tensor::Shape;

struct Rows {
  std::int64_t rows, cols;
};
// Sizes of one element, and rows around the kernels' 256-thread blocks.
const std::vector<Rows> kShapes = {{1, 1}, {3, 5}, {2, 257}, {5, 300}};
const std::vector<std::int64_t> kSizes = {1, 7, 257, 1000};

template <typename T>
class Ops16Bit : public ::testing::Test {};
using HalfTypes = ::testing::Types<tensor::BFloat16, tensor::Float16>;
TYPED_TEST_SUITE(Ops16Bit, HalfTypes);

TYPED_TEST(Ops16Bit, AddAndScaleRoundTheFp32ResultOnce) {
  using T = TypeParam;
  for (const std::int64_t n : kSizes) {
    const auto un = static_cast<std::size_t>(n);
    Half<T> a(un, 1), b(un, 2), out(un, 3);
    std::vector<float> want(un);
    add(view(want, {n}), a.f({n}), b.f({n}));
    add(out.t({n}), a.t({n}), b.t({n}));
    expect_rounded(out.low, want, "add n=" + std::to_string(n));
    scale(view(want, {n}), a.f({n}), 0.37f);
    scale(out.t({n}), a.t({n}), 0.37f);
    expect_rounded(out.low, want, "scale n=" + std::to_string(n));
    add(a.t({n}), a.t({n}), b.t({n}));  // in place
    add(view(a.wide, {n}), a.f({n}), b.f({n}));
    expect_rounded(a.low, a.wide, "add in place n=" + std::to_string(n));
  }
}

TYPED_TEST(Ops16Bit, LayerNormForwardAndBackward) {
  using T = TypeParam;
  for (const auto [rows, cols] : kShapes) {
    const auto n = static_cast<std::size_t>(rows * cols);
    const Shape shape{rows, cols};
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    Half<T> x(n, 4), out(n, 5), dout(n, 6), dx(n, 7);
    auto weight = random_floats(cols, 8), bias = random_floats(cols, 9);
    std::vector<float> want(n), mean(rows), rstd(rows), mean16(rows), rstd16(rows);
    layernorm_forward(view(want, shape), view(mean, {rows}), view(rstd, {rows}), x.f(shape),
                      view(weight, {cols}), view(bias, {cols}), 1e-5f);
    layernorm_forward(out.t(shape), view(mean16, {rows}), view(rstd16, {rows}), x.t(shape),
                      view(weight, {cols}), view(bias, {cols}), 1e-5f);
    expect_rounded(out.low, want, "layernorm out " + what);
    EXPECT_EQ(mean16, mean) << what;
    EXPECT_EQ(rstd16, rstd) << what;

    auto dweight = random_floats(cols, 10), dbias = random_floats(cols, 11);
    auto dweight16 = dweight, dbias16 = dbias;
    layernorm_backward(dx.f(shape), view(dweight, {cols}), view(dbias, {cols}), dout.f(shape),
                       x.f(shape), view(weight, {cols}), view(mean, {rows}), view(rstd, {rows}));
    layernorm_backward(dx.t(shape), view(dweight16, {cols}), view(dbias16, {cols}), dout.t(shape),
                       x.t(shape), view(weight, {cols}), view(mean, {rows}), view(rstd, {rows}));
    expect_rounded(dx.low, dx.wide, "layernorm dx " + what);
    EXPECT_EQ(dweight16, dweight) << what;
    EXPECT_EQ(dbias16, dbias) << what;
  }
}

TYPED_TEST(Ops16Bit, GeluAndBiasGeluEveryKind) {
  using T = TypeParam;
  for (const GeluKind kind : {GeluKind::kTanhFused, GeluKind::kTanhOpenAI, GeluKind::kErf}) {
    for (const auto [rows, cols] : kShapes) {
      const auto n = static_cast<std::size_t>(rows * cols);
      const Shape shape{rows, cols};
      const std::string what = std::to_string(static_cast<int>(kind)) + " " + std::to_string(rows) +
                               "x" + std::to_string(cols);
      Half<T> x(n, 12), out(n, 13), dout(n, 14), dx(n, 15);
      auto bias = random_floats(cols, 16), dbias = random_floats(cols, 17);
      std::vector<float> want(n);
      gelu_forward(view(want, shape), x.f(shape), kind);
      gelu_forward(out.t(shape), x.t(shape), kind);
      expect_rounded(out.low, want, "gelu " + what);
      gelu_backward(dx.f(shape), dout.f(shape), x.f(shape), kind);
      gelu_backward(dx.t(shape), dout.t(shape), x.t(shape), kind);
      expect_rounded(dx.low, dx.wide, "gelu dx " + what);
      dx.sync();

      bias_gelu_forward(view(want, shape), x.f(shape), view(bias, {cols}), kind);
      bias_gelu_forward(out.t(shape), x.t(shape), view(bias, {cols}), kind);
      expect_rounded(out.low, want, "bias_gelu " + what);
      auto dbias16 = dbias;
      bias_gelu_backward(dx.f(shape), view(dbias, {cols}), dout.f(shape), x.f(shape),
                         view(bias, {cols}), kind);
      bias_gelu_backward(dx.t(shape), view(dbias16, {cols}), dout.t(shape), x.t(shape),
                         view(bias, {cols}), kind);
      expect_rounded(dx.low, dx.wide, "bias_gelu dx " + what);
      EXPECT_EQ(dbias16, dbias) << what;
      dx.sync();
      bias_gelu_backward(dx.f(shape), {}, dout.f(shape), x.f(shape), view(bias, {cols}), kind);
      bias_gelu_backward(dx.t(shape), {}, dout.t(shape), x.t(shape), view(bias, {cols}), kind);
      expect_rounded(dx.low, dx.wide, "bias_gelu dx without dbias " + what);
    }
  }
}

TYPED_TEST(Ops16Bit, DropoutAndBiasDropoutAdd) {
  using T = TypeParam;
  const DropoutStream stream{0.3f, 1234, 56};
  for (const auto [rows, cols] : kShapes) {
    const auto n = static_cast<std::size_t>(rows * cols);
    const Shape shape{rows, cols};
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    Half<T> x(n, 18), out(n, 19), residual(n, 20), dout(n, 21), dx(n, 22), dresidual(n, 23);
    auto bias = random_floats(cols, 24), dbias = random_floats(cols, 25);
    std::vector<float> want(n);
    dropout_forward(view(want, shape), x.f(shape), stream);
    dropout_forward(out.t(shape), x.t(shape), stream);
    expect_rounded(out.low, want, "dropout " + what);
    dropout_backward(view(want, shape), dout.f(shape), stream);
    dropout_backward(out.t(shape), dout.t(shape), stream);
    expect_rounded(out.low, want, "dropout dx " + what);

    bias_dropout_add_forward(view(want, shape), x.f(shape), view(bias, {cols}), residual.f(shape),
                             stream);
    bias_dropout_add_forward(out.t(shape), x.t(shape), view(bias, {cols}), residual.t(shape),
                             stream);
    expect_rounded(out.low, want, "bias_dropout_add " + what);
    auto dbias16 = dbias;
    bias_dropout_add_backward(dx.f(shape), view(dbias, {cols}), dresidual.f(shape), dout.f(shape),
                              stream);
    bias_dropout_add_backward(dx.t(shape), view(dbias16, {cols}), dresidual.t(shape), dout.t(shape),
                              stream);
    expect_rounded(dx.low, dx.wide, "bias_dropout_add dx " + what);
    expect_rounded(dresidual.low, dresidual.wide, "bias_dropout_add dresidual " + what);
    EXPECT_EQ(dbias16, dbias) << what;
  }
}

TYPED_TEST(Ops16Bit, EmbeddingLookupsAndBackward) {
  using T = TypeParam;
  constexpr std::int64_t kV = 11, kP = 6;
  for (const std::int64_t h : {1, 5, 257}) {
    const std::vector<std::int64_t> tokens{10, 0, 3, 3, 7, 10, 2}, positions{0, 1, 2, 3, 4, 5, 0};
    const auto n = static_cast<std::int64_t>(tokens.size());
    auto ids = tokens, places = positions;
    const Shape shape{n, h};
    const auto count = static_cast<std::size_t>(n * h);
    const std::string what = "h=" + std::to_string(h);
    auto wte = random_floats(static_cast<std::size_t>(kV * h), 26, -3.0f, 3.0f);
    auto wpe = random_floats(static_cast<std::size_t>(kP * h), 27, -3.0f, 3.0f);
    Half<T> out(count, 28), dout(count, 29);
    std::vector<float> want(count);
    // A shard holding ids [4, 9): the others give zeros.
    std::vector<float> shard(wte.begin() + 4 * h, wte.begin() + 9 * h);
    embedding_lookup(view(want, shape), view(ids, {n}), view(shard, {5, h}), 4, kV);
    embedding_lookup(out.t(shape), view(ids, {n}), view(shard, {5, h}), 4, kV);
    expect_rounded(out.low, want, "lookup " + what);
    out.sync();
    embedding_lookup_add(view(out.wide, shape), view(places, {n}), view(wpe, {kP, h}));
    embedding_lookup_add(out.t(shape), view(places, {n}), view(wpe, {kP, h}));
    expect_rounded(out.low, out.wide, "lookup_add " + what);
    embedding_forward(view(want, shape), view(ids, {n}), view(wte, {kV, h}), view(places, {n}),
                      view(wpe, {kP, h}));
    embedding_forward(out.t(shape), view(ids, {n}), view(wte, {kV, h}), view(places, {n}),
                      view(wpe, {kP, h}));
    expect_rounded(out.low, want, "forward (one rounding of wte + wpe) " + what);

    auto dtable = random_floats(static_cast<std::size_t>(kV * h), 30);
    auto dtable16 = dtable;
    embedding_backward(view(dtable, {kV, h}), dout.f(shape), view(ids, {n}));
    embedding_backward(view(dtable16, {kV, h}), dout.t(shape), view(ids, {n}));
    EXPECT_EQ(dtable16, dtable) << "backward " << what;
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

TEST(Ops16Bit, DtypeMixesFailWithOneLine) {
  Half<tensor::BFloat16> a(4, 1);
  Half<tensor::Float16> b(4, 2);
  std::vector<float> f(4), stats(1), params(4);
  std::vector<std::int64_t> ints(4), ids{0};
  const Shape shape{1, 4};
  expect_one_line_failure([&] { add(a.t({4}), a.t({4}), view(f, {4})); },
                          "ops::add: b must have a's dtype bfloat16, got float32");
  expect_one_line_failure([&] { scale(b.t({4}), a.t({4}), 2.0f); },
                          "ops::scale: out must have x's dtype bfloat16, got float16");
  expect_one_line_failure([&] { add(view(ints, {4}), view(ints, {4}), view(ints, {4})); },
                          "ops::add: a must be float32, bfloat16 or float16, got int64");
  expect_one_line_failure(
      [&] {
        layernorm_forward(b.t(shape), view(stats, {1}), view(stats, {1}), a.t(shape),
                          view(params, {4}), view(params, {4}), 1e-5f);
      },
      "ops::layernorm_forward: out must have x's dtype bfloat16, got float16");
  // Parameters may be fp32 or the activations' dtype (ops_16bit_params_test.cpp), not another.
  std::vector<tensor::Float16> low_params(4);
  expect_one_line_failure(
      [&] {
        layernorm_forward(a.t(shape), view(stats, {1}), view(stats, {1}), a.t(shape),
                          view(low_params, {4}), view(params, {4}), 1e-5f);
      },
      "ops::layernorm_forward: weight must be float32 or x's dtype bfloat16, got float16");
  expect_one_line_failure([&] { gelu_backward(a.t({4}), b.t({4}), a.t({4})); },
                          "ops::gelu_backward: dout must have x's dtype bfloat16, got float16");
  expect_one_line_failure(
      [&] {
        bias_dropout_add_forward(a.t(shape), a.t(shape), view(params, {4}), view(f, shape),
                                 DropoutStream{});
      },
      "ops::bias_dropout_add_forward: residual must have x's dtype bfloat16, got float32");
  expect_one_line_failure(
      [&] {
        embedding_lookup(a.t(shape), view(ids, {1}), view(low_params, {1, 4}));
      },
      "ops::embedding_lookup: table must be float32 or out's dtype bfloat16, got float16");
}

}  // namespace
}  // namespace mds::ops
