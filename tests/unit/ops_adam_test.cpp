#include <gtest/gtest.h>
#include <omp.h>

#include "base/error.h"
#include "ops/adam.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::random_floats;
using ops_test::view;

TEST(OpsAdamW, TwoStepsMatchTheSpecFormulaInDouble) {
  constexpr std::int64_t kN = 257;
  auto p = random_floats(kN, 1), m = random_floats(kN, 2), v = random_floats(kN, 3, 0, 1);
  const AdamWConfig config{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  std::vector<double> rp(p.begin(), p.end()), rm(m.begin(), m.end()), rv(v.begin(), v.end());
  for (std::int64_t step = 1; step <= 2; ++step) {
    auto g = random_floats(kN, 10 + static_cast<std::uint32_t>(step));
    adamw_step(view(p, {kN}), view(g, {kN}), view(m, {kN}), view(v, {kN}), config, step);
    const double b1 = config.beta1, b2 = config.beta2;
    const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
    for (std::int64_t i = 0; i < kN; ++i) {
      rm[i] = b1 * rm[i] + (1 - b1) * g[i];
      rv[i] = b2 * rv[i] + (1 - b2) * g[i] * g[i];
      const double update =
          (rm[i] / bc1) / (std::sqrt(rv[i] / bc2) + config.eps) + config.weight_decay * rp[i];
      rp[i] -= config.lr * update;
    }
  }
  for (std::int64_t i = 0; i < kN; ++i) {
    EXPECT_NEAR(p[i], rp[i], 1e-6) << i;
    EXPECT_NEAR(m[i], rm[i], 1e-6) << i;
    EXPECT_NEAR(v[i], rv[i], 1e-6) << i;
  }
  std::vector<float> short_grad(kN - 1);
  EXPECT_THROW(adamw_step(view(p, {kN}), view(short_grad, {kN - 1}), view(m, {kN}), view(v, {kN}),
                          config, 3),
               base::Error);
  EXPECT_THROW(adamw_step(view(p, {kN}), view(p, {kN}), view(m, {kN}), view(v, {kN}), config, 0),
               base::Error);
}

TEST(OpsAdamW, FirstStepMovesEachWeightByAboutLr) {
  // With bias correction and wd = 0 the first update is lr·g/(|g| + eps) ≈ ±lr.
  std::vector<float> p{0.0f, 1.0f}, g{0.5f, -2.0f}, m(2), v(2);
  adamw_step(view(p, {2}), view(g, {2}), view(m, {2}), view(v, {2}),
             {0.01f, 0.9f, 0.999f, 1e-8f, 0}, 1);
  EXPECT_NEAR(p[0], -0.01f, 1e-7);
  EXPECT_NEAR(p[1], 1.01f, 1e-7);
}

TEST(OpsNorm, SumOfSquaresIsExactEnoughAndThreadIndependent) {
  constexpr std::int64_t kN = 100001;
  auto x = random_floats(kN, 4);
  double want = 0;
  for (const float v : x) want += static_cast<double>(v) * v;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = sum_of_squares(view(x, {kN}));
  omp_set_num_threads(3);
  const double three = sum_of_squares(view(x, {kN}));
  omp_set_num_threads(saved);
  EXPECT_EQ(one, three);
  EXPECT_NEAR(one, want, 1e-9 * want);
  EXPECT_NEAR(l2_norm(view(x, {kN})), std::sqrt(want), 1e-9 * std::sqrt(want));
  std::vector<float> empty;
  EXPECT_EQ(sum_of_squares(view(empty, {0})), 0.0);
}

}  // namespace
}  // namespace mds::ops
