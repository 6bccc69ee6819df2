#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "base/error.h"
#include "ops/gelu.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_close;
using ops_test::numeric_grad;
using ops_test::random_floats;
using ops_test::view;
using ops_test::weighted_sum;

// Upstream's formulas in double (training.md §1.5).
double gelu_reference(double z, GeluKind kind) {
  switch (kind) {
    case GeluKind::kTanhFused:
      return 0.5 * z * (1 + std::tanh(0.79788456 * z * (1 + 0.044715 * z * z)));
    case GeluKind::kTanhOpenAI:
      return 0.5 * z * (1 + std::tanh(0.7978845608028654 * z * (1 + 0.044715 * z * z)));
    case GeluKind::kErf:
      return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
  }
  return 0;
}

constexpr GeluKind kKinds[] = {GeluKind::kTanhFused, GeluKind::kTanhOpenAI, GeluKind::kErf};

TEST(OpsGelu, ForwardMatchesUpstreamFormulas) {
  auto x = random_floats(200, 1, -6, 6);
  for (const GeluKind kind : kKinds) {
    std::vector<float> out(x.size());
    gelu_forward(view(out, {10, 20}), view(x, {10, 20}), kind);
    std::vector<double> want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) want[i] = gelu_reference(x[i], kind);
    expect_close(out, want, 1e-6, 1e-6, "gelu");
  }
}

TEST(OpsGelu, FusedBackwardIsTheClosedFormDerivative) {
  // The hand-written derivative of the fused kernel against the exact derivative of its forward.
  for (double z = -6; z <= 6; z += 0.01) {
    const double h = 1e-5;
    const double numeric = (gelu_reference(z + h, GeluKind::kTanhFused) -
                            gelu_reference(z - h, GeluKind::kTanhFused)) /
                           (2 * h);
    std::vector<float> x{static_cast<float>(z)}, dout{1.0f}, dx{0.0f};
    gelu_backward(view(dx, {1}), view(dout, {1}), view(x, {1}), GeluKind::kTanhFused);
    ASSERT_NEAR(dx[0], numeric, 2e-6) << z;
  }
}

TEST(OpsGelu, BackwardMatchesFiniteDifferences) {
  auto x = random_floats(60, 2, -4, 4);
  auto dout = random_floats(60, 3);
  for (const GeluKind kind : kKinds) {
    auto loss = [&] {
      std::vector<float> out(x.size());
      gelu_forward(view(out, {60}), view(x, {60}), kind);
      return weighted_sum(out, dout);
    };
    std::vector<float> dx(x.size());
    gelu_backward(view(dx, {60}), view(dout, {60}), view(x, {60}), kind);
    expect_close(dx, numeric_grad(x, loss, 1e-3f), 1e-3, 1e-3, "dx");
  }
}

TEST(OpsBiasGelu, ForwardAndBackwardMatchUnfusedComposition) {
  constexpr int kRows = 5, kF = 8;
  auto x = random_floats(kRows * kF, 4, -3, 3), b = random_floats(kF, 5);
  auto dout = random_floats(kRows * kF, 6);
  std::vector<float> out(x.size());
  bias_gelu_forward(view(out, {kRows, kF}), view(x, {kRows, kF}), view(b, {kF}));
  std::vector<double> want(x.size());
  for (int i = 0; i < kRows * kF; ++i) {
    want[i] = gelu_reference(static_cast<float>(x[i] + b[i % kF]), GeluKind::kTanhFused);
  }
  expect_close(out, want, 1e-6, 1e-6, "bias_gelu");
  auto loss = [&] {
    std::vector<float> y(x.size());
    bias_gelu_forward(view(y, {kRows, kF}), view(x, {kRows, kF}), view(b, {kF}));
    return weighted_sum(y, dout);
  };
  std::vector<float> dx(x.size()), db(kF);
  bias_gelu_backward(view(dx, {kRows, kF}), view(db, {kF}), view(dout, {kRows, kF}),
                     view(x, {kRows, kF}), view(b, {kF}));
  expect_close(dx, numeric_grad(x, loss, 1e-3f), 1e-3, 1e-3, "dx");
  expect_close(db, numeric_grad(b, loss, 1e-3f), 2e-3, 1e-3, "dbias");
}

// Dx::kOverwrite gives dx the values of accumulating onto zeros whatever dx held (NaN here);
// dbias still adds.
TEST(OpsBiasGelu, BackwardOverwritesDxWhenAsked) {
  constexpr int kRows = 5, kF = 8;
  auto x = random_floats(kRows * kF, 4, -3, 3), b = random_floats(kF, 5);
  auto dout = random_floats(kRows * kF, 6);
  std::vector<float> want(x.size(), 0.0f), db_want(kF, 1.0f);
  bias_gelu_backward(view(want, {kRows, kF}), view(db_want, {kF}), view(dout, {kRows, kF}),
                     view(x, {kRows, kF}), view(b, {kF}));
  std::vector<float> dx(x.size(), std::numeric_limits<float>::quiet_NaN()), db(kF, 1.0f);
  bias_gelu_backward(DeviceContext{}, view(dx, {kRows, kF}), view(db, {kF}),
                     view(dout, {kRows, kF}), view(x, {kRows, kF}), view(b, {kF}),
                     GeluKind::kTanhFused, Dx::kOverwrite);
  EXPECT_EQ(dx, want);
  EXPECT_EQ(db, db_want);
}

// With no bias, x holding it already (the cuBLASLt epilogue's pre-activation,
// ops/gelu_epilogues.h): the bits of the biased backward on the bias-free x, since x + b is what
// the op adds first; a bias-free x of a wrong width is named.
TEST(OpsBiasGelu, BackwardWithoutBiasTakesXAsTheGeluInput) {
  constexpr int kRows = 5, kF = 8;
  auto x = random_floats(kRows * kF, 4, -3, 3), b = random_floats(kF, 5);
  auto dout = random_floats(kRows * kF, 6);
  std::vector<float> pre(x.size());
  for (int i = 0; i < kRows * kF; ++i) pre[i] = x[i] + b[i % kF];
  std::vector<float> want(x.size(), 0.5f), db_want(kF, 1.0f);
  bias_gelu_backward(view(want, {kRows, kF}), view(db_want, {kF}), view(dout, {kRows, kF}),
                     view(x, {kRows, kF}), view(b, {kF}));
  std::vector<float> dx(x.size(), 0.5f), db(kF, 1.0f);
  bias_gelu_backward(view(dx, {kRows, kF}), view(db, {kF}), view(dout, {kRows, kF}),
                     view(pre, {kRows, kF}), tensor::Tensor{});
  EXPECT_EQ(dx, want);
  EXPECT_EQ(db, db_want);
  std::vector<float> short_db(kF - 1);
  EXPECT_THROW(
      bias_gelu_backward(view(dx, {kRows, kF}), view(short_db, {kF - 1}), view(dout, {kRows, kF}),
                         view(pre, {kRows, kF}), tensor::Tensor{}),
      base::Error);
}

}  // namespace
}  // namespace mds::ops
