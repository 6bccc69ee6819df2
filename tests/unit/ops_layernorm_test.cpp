#include <gtest/gtest.h>

#include "base/error.h"
#include "ops/layernorm.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_close;
using ops_test::numeric_grad;
using ops_test::random_floats;
using ops_test::view;
using ops_test::weighted_sum;

constexpr std::int64_t kRows = 6, kC = 10;

TEST(OpsLayerNorm, ForwardMatchesNaiveFormula) {
  auto x = random_floats(kRows * kC, 1, -2, 3), w = random_floats(kC, 2), b = random_floats(kC, 3);
  std::vector<float> out(kRows * kC), mean(kRows), rstd(kRows);
  layernorm_forward(view(out, {2, 3, kC}), view(mean, {2, 3}), view(rstd, {2, 3}),
                    view(x, {2, 3, kC}), view(w, {kC}), view(b, {kC}), 1e-5f);
  std::vector<double> want(out.size());
  for (int r = 0; r < kRows; ++r) {
    double mu = 0, var = 0;
    for (int c = 0; c < kC; ++c) mu += x[r * kC + c];
    mu /= kC;
    for (int c = 0; c < kC; ++c) var += (x[r * kC + c] - mu) * (x[r * kC + c] - mu);
    var /= kC;
    EXPECT_NEAR(mean[r], mu, 1e-6);
    EXPECT_NEAR(rstd[r], 1 / std::sqrt(var + 1e-5), 1e-5);
    for (int c = 0; c < kC; ++c) {
      want[r * kC + c] = (x[r * kC + c] - mu) / std::sqrt(var + 1e-5) * w[c] + b[c];
    }
  }
  expect_close(out, want, 1e-5, 1e-5, "layernorm");
}

TEST(OpsLayerNorm, BackwardMatchesFiniteDifferences) {
  auto x = random_floats(kRows * kC, 4, -2, 2), w = random_floats(kC, 5), b = random_floats(kC, 6);
  auto dout = random_floats(kRows * kC, 7);
  std::vector<float> mean(kRows), rstd(kRows);
  auto loss = [&] {
    std::vector<float> out(kRows * kC);
    layernorm_forward(view(out, {kRows, kC}), view(mean, {kRows}), view(rstd, {kRows}),
                      view(x, {kRows, kC}), view(w, {kC}), view(b, {kC}), 1e-5f);
    return weighted_sum(out, dout);
  };
  loss();
  std::vector<float> dx(kRows * kC), dw(kC), db(kC);
  layernorm_backward(view(dx, {kRows, kC}), view(dw, {kC}), view(db, {kC}), view(dout, {kRows, kC}),
                     view(x, {kRows, kC}), view(w, {kC}), view(mean, {kRows}), view(rstd, {kRows}));
  expect_close(dx, numeric_grad(x, loss, 1e-3f), 3e-3, 3e-3, "dx");
  expect_close(dw, numeric_grad(w, loss), 2e-3, 1e-3, "dweight");
  expect_close(db, numeric_grad(b, loss), 2e-3, 1e-3, "dbias");
  // Without parameter gradients dx is the same, and it accumulates.
  std::vector<float> dx2(dx);
  layernorm_backward(view(dx2, {kRows, kC}), {}, {}, view(dout, {kRows, kC}), view(x, {kRows, kC}),
                     view(w, {kC}), view(mean, {kRows}), view(rstd, {kRows}));
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_FLOAT_EQ(dx2[i], 2 * dx[i]);
}

TEST(OpsLayerNorm, RejectsWrongStatShape) {
  std::vector<float> x(kRows * kC), w(kC), b(kC), out(kRows * kC), mean(kRows - 1), rstd(kRows);
  EXPECT_THROW(
      layernorm_forward(view(out, {kRows, kC}), view(mean, {kRows - 1}), view(rstd, {kRows}),
                        view(x, {kRows, kC}), view(w, {kC}), view(b, {kC}), 1e-5f),
      base::Error);
}

}  // namespace
}  // namespace mds::ops
