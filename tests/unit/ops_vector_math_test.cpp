#include <gtest/gtest.h>

#include <cmath>

#include "ops/cpu/cross_entropy.h"
#include "ops/cpu/gelu.h"
#include "ops/cpu/vector_math.h"
#include "ops_test_util.h"

namespace mds::ops::cpu {
namespace {

double ulps_from(float got, double exact) {
  const auto rounded = static_cast<float>(exact);
  const double ulp = std::nextafter(rounded, INFINITY) - rounded;
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

TEST(OpsVectorMath, ExpIsWithinTwoUlpOverTheNormalRange) {
  double worst = 0.0;
  float worst_at = 0.0f;
  // About 2.5 million arguments, denser near zero where softmax inputs cluster.
  for (float x = -86.8f; x < 88.7f; x += 1e-5f + std::fabs(x) * 2e-5f) {
    const double error = ulps_from(vector_exp(x), std::exp(static_cast<double>(x)));
    if (error > worst) {
      worst = error;
      worst_at = x;
    }
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worst_at;
}

TEST(OpsVectorMath, ExpEdgeCases) {
  EXPECT_EQ(vector_exp(0.0f), 1.0f);
  EXPECT_EQ(vector_exp(-0.0f), 1.0f);
  EXPECT_EQ(vector_exp(-87.5f), 0.0f);
  EXPECT_EQ(vector_exp(-INFINITY), 0.0f);
  EXPECT_EQ(vector_exp(89.0f), INFINITY);
  EXPECT_EQ(vector_exp(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(vector_exp(NAN)));
  // The top of the range does not overflow early (2^n is built as 2^(n−1)·2).
  EXPECT_LE(ulps_from(vector_exp(88.7f), std::exp(static_cast<double>(88.7f))), 2.0);
}

TEST(OpsVectorMath, TanhIsWithinHalfAnUlpOfOneAndOdd) {
  double worst = 0.0;
  for (float x = -20.0f; x <= 20.0f; x += 1.7e-4f) {
    worst = std::max(worst, std::fabs(vector_tanh(x) - std::tanh(static_cast<double>(x))));
    EXPECT_EQ(vector_tanh(-x), -vector_tanh(x)) << x;
  }
  EXPECT_LE(worst, std::ldexp(1.0, -23));
  EXPECT_EQ(vector_tanh(0.0f), 0.0f);
  EXPECT_EQ(vector_tanh(100.0f), 1.0f);
  EXPECT_EQ(vector_tanh(-INFINITY), -1.0f);
}

// The loops are compiled for AVX2 and for baseline x86-64 (MDS_VECTOR_CLONES) and vectorized; on
// whichever this CPU runs they must give exactly the scalar function's bits.
TEST(OpsVectorMath, VectorizedLoopsEqualTheScalarFunctionsBitForBit) {
  constexpr std::int64_t kRows = 3, kCols = 203;  // not a multiple of any vector width
  const auto x = ops_test::random_floats(kRows * kCols, 21, -6, 6);
  const auto bias = ops_test::random_floats(kCols, 22);
  const auto dout = ops_test::random_floats(kRows * kCols, 23);
  for (const GeluKind kind : {GeluKind::kTanhFused, GeluKind::kTanhOpenAI, GeluKind::kErf}) {
    std::vector<float> out(x.size()), dx(x.size(), 0.25f), dbias(kCols, 0.0f);
    bias_gelu_forward(out.data(), x.data(), bias.data(), kRows, kCols, kind);
    bias_gelu_backward(dx.data(), dbias.data(), dout.data(), x.data(), bias.data(), kRows, kCols,
                       kind);
    for (std::int64_t i = 0; i < kRows * kCols; ++i) {
      const float z = x[i] + bias[i % kCols];
      ASSERT_EQ(out[i], gelu(z, kind)) << i;
      ASSERT_EQ(dx[i], 0.25f + gelu_derivative(z, kind) * dout[i]) << i;
    }
  }
  auto logits = ops_test::random_floats(kRows * kCols, 24, -30, 30);
  const auto original = logits;
  std::vector<float> max(kRows), sum(kRows);
  cross_entropy_row_max(max.data(), logits.data(), kRows, kCols);
  cross_entropy_exp_sum(sum.data(), logits.data(), max.data(), kRows, kCols);
  for (std::int64_t i = 0; i < kRows * kCols; ++i) {
    ASSERT_EQ(logits[i], vector_exp(original[i] - max[i / kCols])) << i;
  }
}

}  // namespace
}  // namespace mds::ops::cpu
