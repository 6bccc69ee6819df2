#include "kernels/adam.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/cpu/adam.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_floats;

TEST(GpuAdam, AdamWStepMatchesCpu) {
  ops::AdamWConfig config;
  config.lr = 3e-4f;
  config.weight_decay = 0.1f;
  for (const std::int64_t n : gpu_test::flat_sizes()) {
    SCOPED_TRACE(n);
    const auto un = static_cast<std::size_t>(n);
    auto params = random_floats(un, 40), exp_avg = random_floats(un, 41, -0.01f, 0.01f);
    auto exp_avg_sq = random_floats(un, 42, 0.0f, 1e-4f);
    const auto grads = random_floats(un, 43, -0.1f, 0.1f);
    DeviceArray<float> dp(params), dm(exp_avg), dv(exp_avg_sq), dg(grads);
    for (std::int64_t step = 1; step <= 3; ++step) {
      const auto bc1 = static_cast<float>(1.0 - std::pow(double{config.beta1}, step));
      const auto bc2 = static_cast<float>(1.0 - std::pow(double{config.beta2}, step));
      ops::cpu::adamw_step(params.data(), grads.data(), exp_avg.data(), exp_avg_sq.data(), n,
                           config, bc1, bc2);
      kernels::adamw_step(dp.get(), dg.get(), dm.get(), dv.get(), n, config, bc1, bc2, nullptr);
    }
    // The same statements in the same order with correctly rounded sqrt and division: identical.
    EXPECT_EQ(dp.download(), params);
    EXPECT_EQ(dm.download(), exp_avg);
    EXPECT_EQ(dv.download(), exp_avg_sq);
  }
}

TEST(GpuAdam, SumOfSquaresMatchesCpuAndIsDeterministic) {
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{511},
                               std::int64_t{513}, std::int64_t{100003}, std::int64_t{1} << 22}) {
    SCOPED_TRACE(n);
    const auto x = random_floats(static_cast<std::size_t>(n), 44);
    const double ref = ops::cpu::sum_of_squares(x.data(), n);
    DeviceArray<float> dx(x);
    const double got = kernels::sum_of_squares(dx.get(), n, nullptr);
    EXPECT_LE(std::abs(got - ref), 1e-12 * (ref > 1.0 ? ref : 1.0));
    EXPECT_EQ(kernels::sum_of_squares(dx.get(), n, nullptr), got);
    DeviceArray<double> result(1), partials(kernels::kSumOfSquaresPartials);
    kernels::sum_of_squares(result.get(), partials.get(), dx.get(), n, nullptr);
    EXPECT_EQ(result.download()[0], got);
  }
}

}  // namespace
}  // namespace mds
