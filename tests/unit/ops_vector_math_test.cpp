#include <gtest/gtest.h>

#include <cmath>

#include "ops/cpu/vector_math.h"

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

}  // namespace
}  // namespace mds::ops::cpu
