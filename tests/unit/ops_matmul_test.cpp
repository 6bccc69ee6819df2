#include <gtest/gtest.h>

#include <limits>

#include "base/error.h"
#include "ops/matmul.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_close;
using ops_test::numeric_grad;
using ops_test::random_floats;
using ops_test::view;
using ops_test::weighted_sum;
using tensor::Tensor;

constexpr std::int64_t kM = 6, kN = 5, kK = 7;

TEST(OpsLinear, ForwardMatchesNaiveFormula) {
  auto x = random_floats(kM * kK, 1), w = random_floats(kN * kK, 2), b = random_floats(kN, 3);
  std::vector<float> out(kM * kN);
  linear_forward(view(out, {2, 3, kN}), view(x, {2, 3, kK}), view(w, {kN, kK}), view(b, {kN}));
  std::vector<double> want(kM * kN);
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      double s = b[j];
      for (int k = 0; k < kK; ++k) s += static_cast<double>(x[i * kK + k]) * w[j * kK + k];
      want[i * kN + j] = s;
    }
  }
  expect_close(out, want, 1e-5, 1e-5, "linear");
  std::vector<float> no_bias(kM * kN);
  linear_forward(view(no_bias, {kM, kN}), view(x, {kM, kK}), view(w, {kN, kK}));
  for (int i = 0; i < kM * kN; ++i) EXPECT_NEAR(no_bias[i] + b[i % kN], out[i], 1e-5);
}

TEST(OpsLinear, BackwardMatchesFiniteDifferencesAndAccumulates) {
  auto x = random_floats(kM * kK, 4), w = random_floats(kN * kK, 5), b = random_floats(kN, 6);
  const auto dout = random_floats(kM * kN, 7);
  auto loss = [&] {
    std::vector<float> out(kM * kN);
    linear_forward(view(out, {kM, kN}), view(x, {kM, kK}), view(w, {kN, kK}), view(b, {kN}));
    return weighted_sum(out, dout);
  };
  // Start from ones: the backward must add, not overwrite.
  std::vector<float> dx(kM * kK, 1.0f), dw(kN * kK, 1.0f), db(kN, 1.0f);
  auto dout_copy = dout;
  linear_backward(view(dx, {kM, kK}), view(dw, {kN, kK}), view(db, {kN}), view(dout_copy, {kM, kN}),
                  view(x, {kM, kK}), view(w, {kN, kK}));
  auto shifted = [](std::vector<double> g) {
    for (double& v : g) v += 1.0;
    return g;
  };
  expect_close(dx, shifted(numeric_grad(x, loss)), 2e-3, 1e-3, "dx");
  expect_close(dw, shifted(numeric_grad(w, loss)), 2e-3, 1e-3, "dweight");
  expect_close(db, shifted(numeric_grad(b, loss)), 2e-3, 1e-3, "dbias");
}

// Dx::kOverwrite gives dx the bits of accumulating onto zeros, whatever dx held (NaN here);
// dweight and dbias still accumulate.
TEST(OpsLinear, BackwardOverwritesDxWhenAsked) {
  auto x = random_floats(kM * kK, 4), w = random_floats(kN * kK, 5);
  auto dout = random_floats(kM * kN, 7);
  std::vector<float> want(kM * kK, 0.0f), dw(kN * kK, 1.0f), db(kN, 1.0f);
  auto dw_want = dw, db_want = db;
  linear_backward(view(want, {kM, kK}), view(dw_want, {kN, kK}), view(db_want, {kN}),
                  view(dout, {kM, kN}), view(x, {kM, kK}), view(w, {kN, kK}));
  std::vector<float> dx(kM * kK, std::numeric_limits<float>::quiet_NaN());
  linear_backward(view(dx, {kM, kK}), view(dw, {kN, kK}), view(db, {kN}), view(dout, {kM, kN}),
                  view(x, {kM, kK}), view(w, {kN, kK}), Dx::kOverwrite);
  EXPECT_EQ(dx, want);
  EXPECT_EQ(dw, dw_want);
  EXPECT_EQ(db, db_want);
}

TEST(OpsLinear, RejectsMismatchedShapes) {
  std::vector<float> x(kM * kK), w(kN * kK), out(kM * kN), bad(kN + 1);
  EXPECT_THROW(linear_forward(view(out, {kM, kN}), view(x, {kM, kK}), view(w, {kN, kK}),
                              view(bad, {kN + 1})),
               base::Error);
  EXPECT_THROW(linear_forward(view(out, {kM, kN}), view(x, {kM, kK}), view(w, {kK, kN})),
               base::Error);
  Tensor cuda_x(x.data(), tensor::DType::kFloat32, {kM, kK}, {tensor::DeviceKind::kCuda, 0});
  try {
    linear_forward(view(out, {kM, kN}), cuda_x, view(w, {kN, kK}));
    FAIL() << "no error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("different devices"), std::string::npos) << e.what();
  }
}

TEST(OpsBatchedMatmul, AllTransposeCombinationsMatchNaive) {
  constexpr int kB = 3, m = 4, n = 5, k = 6;
  auto a = random_floats(kB * m * k, 8), b = random_floats(kB * k * n, 9);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      std::vector<float> out(kB * m * n, 1.0f);
      batched_matmul(
          view(out, {kB, m, n}), view(a, ta ? tensor::Shape{kB, k, m} : tensor::Shape{kB, m, k}),
          view(b, tb ? tensor::Shape{kB, n, k} : tensor::Shape{kB, k, n}), ta, tb, 0.5f, 2.0f);
      std::vector<double> want(out.size());
      for (int z = 0; z < kB; ++z) {
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < n; ++j) {
            double s = 0;
            for (int q = 0; q < k; ++q) {
              const float av = ta ? a[(z * k + q) * m + i] : a[(z * m + i) * k + q];
              const float bv = tb ? b[(z * n + j) * k + q] : b[(z * k + q) * n + j];
              s += static_cast<double>(av) * bv;
            }
            want[(z * m + i) * n + j] = 0.5 * s + 2.0;
          }
        }
      }
      expect_close(out, want, 1e-5, 1e-5, "bmm");
    }
  }
}

}  // namespace
}  // namespace mds::ops
