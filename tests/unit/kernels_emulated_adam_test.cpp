// The AdamW and Σ x² kernels' device code (kernels/adam_kernels.cuh, sum_of_squares.cuh) run on
// the CPU under the SIMT emulation with the launch shapes kernels/adam.cu uses, against their CPU
// twins (ops/cpu/adam): three AdamW steps bit for bit (tests/gpu/adam_test.cpp's bound), with the
// new weights rounded to bf16 and fp16 in the same pass; the deterministic two-pass Σ x² in double
// within 1e-12 of the CPU's and bit-identical on a rerun. Outputs start poisoned, guards stay
// untouched; the step's grid-stride loop also runs on a narrowed grid.
// First the emulation (CUDA keywords, device_common.cuh's host twins), then the kernels.
#include "tests/unit/emulated_device_common.h"

#include "kernels/adam_kernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/cpu/adam.h"
#include "tests/unit/emulated_compare.h"
#include "tests/unit/guarded_buffer.h"

namespace mds {
namespace {

namespace ak = kernels::adam_detail;
using emulated::bits_of;
using emulated::GuardedBuffer;
using tensor::DType;

constexpr std::int64_t kSizes[] = {1, 3, 255, 256, 257, 1000, 4099};

// The optimizer state of n parameters, on the host (for the CPU twin) and in guarded buffers.
struct State {
  explicit State(std::size_t n)
      : params(emulated::random_floats(n, 40)),
        exp_avg(emulated::random_floats(n, 41, -0.01f, 0.01f)),
        exp_avg_sq(emulated::random_floats(n, 42, 0.0f, 1e-4f)),
        grads(emulated::random_floats(n, 43, -0.1f, 0.1f)),
        d_params(params),
        d_exp_avg(exp_avg),
        d_exp_avg_sq(exp_avg_sq),
        d_grads(grads) {}
  std::vector<float> params, exp_avg, exp_avg_sq, grads;
  GuardedBuffer<float> d_params, d_exp_avg, d_exp_avg_sq, d_grads;

  void expect_equal_and_in_bounds() const {
    EXPECT_EQ(d_params.values(), params);
    EXPECT_EQ(d_exp_avg.values(), exp_avg);
    EXPECT_EQ(d_exp_avg_sq.values(), exp_avg_sq);
    EXPECT_EQ(d_params.guard_bytes_written() + d_exp_avg.guard_bytes_written() +
                  d_exp_avg_sq.guard_bytes_written() + d_grads.guard_bytes_written(),
              0u);
  }
};

float bias_correction(float beta, std::int64_t step) {
  return static_cast<float>(1.0 - std::pow(double{beta}, static_cast<double>(step)));
}

ops::AdamWConfig test_config() {
  ops::AdamWConfig config;
  config.lr = 3e-3f;
  config.weight_decay = 0.1f;
  return config;
}

TEST(KernelsEmulatedAdam, ThreeStepsAreBitIdenticalToCpu) {
  const ops::AdamWConfig config = test_config();
  for (const std::int64_t n : kSizes) {
    SCOPED_TRACE(n);
    State s(static_cast<std::size_t>(n));
    for (std::int64_t step = 1; step <= 3; ++step) {
      const float bc1 = bias_correction(config.beta1, step),
                  bc2 = bias_correction(config.beta2, step);
      ops::cpu::adamw_step(s.params.data(), s.grads.data(), s.exp_avg.data(), s.exp_avg_sq.data(),
                           n, config, bc1, bc2);
      emulated::launch(ak::step_shape(n), [&] {
        ak::adamw_kernel(s.d_params.data(), s.d_grads.data(), s.d_exp_avg.data(),
                         s.d_exp_avg_sq.data(), n, config, bc1, bc2);
      });
    }
    s.expect_equal_and_in_bounds();
  }
}

TEST(KernelsEmulatedAdam, StepAndCastAreBitIdenticalToCpu) {
  const ops::AdamWConfig config = test_config();
  for (const DType low_dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (const std::int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << tensor::dtype_name(low_dtype) << " n=" << n);
      const auto un = static_cast<std::size_t>(n);
      State s(un);
      std::vector<std::uint16_t> low(un);
      GuardedBuffer<std::uint16_t> d_low(un);  // poisoned
      for (std::int64_t step = 1; step <= 3; ++step) {
        const float bc1 = bias_correction(config.beta1, step),
                    bc2 = bias_correction(config.beta2, step);
        ops::cpu::adamw_step_and_cast(s.params.data(), s.grads.data(), s.exp_avg.data(),
                                      s.exp_avg_sq.data(), n, config, bc1, bc2, low.data(),
                                      low_dtype);
        emulated::launch(ak::step_shape(n), [&] {
          ak::adamw_cast_kernel(s.d_params.data(), s.d_grads.data(), s.d_exp_avg.data(),
                                s.d_exp_avg_sq.data(), d_low.data(), ak::rounds_to_bf16(low_dtype),
                                n, config, bc1, bc2);
        });
      }
      s.expect_equal_and_in_bounds();
      EXPECT_EQ(d_low.values(), low);
      EXPECT_EQ(d_low.guard_bytes_written(), 0u);
    }
  }
}

TEST(KernelsEmulatedAdam, StepLoopWrapsOnANarrowGrid) {
  const ops::AdamWConfig config = test_config();
  const std::int64_t n = 4099;
  State s(static_cast<std::size_t>(n));
  const float bc1 = bias_correction(config.beta1, 1), bc2 = bias_correction(config.beta2, 1);
  ops::cpu::adamw_step(s.params.data(), s.grads.data(), s.exp_avg.data(), s.exp_avg_sq.data(), n,
                       config, bc1, bc2);
  emulated::launch_narrowed(ak::step_shape(n), 2, [&] {
    ak::adamw_kernel(s.d_params.data(), s.d_grads.data(), s.d_exp_avg.data(), s.d_exp_avg_sq.data(),
                     n, config, bc1, bc2);
  });
  s.expect_equal_and_in_bounds();
}

// Both passes of kernels::sum_of_squares(result, partials, x, n), as adam.cu launches them.
double emulated_sum_of_squares(const GuardedBuffer<float>& x, std::int64_t n) {
  GuardedBuffer<double> result(1),
      partials(static_cast<std::size_t>(kernels::kSumOfSquaresPartials));
  emulated::launch(ak::partials_shape(),
                   [&] { ak::partial_squares_kernel(partials.data(), x.data(), n); });
  emulated::launch(ak::total_shape(),
                   [&] { ak::sum_partials_kernel(result.data(), partials.data()); });
  EXPECT_EQ(result.guard_bytes_written() + partials.guard_bytes_written(), 0u);
  return result.values()[0];
}

TEST(KernelsEmulatedAdam, SumOfSquaresMatchesCpuAndRepeats) {
  // 512 blocks a pass whatever n is: a few sizes around the split.
  for (const std::int64_t n :
       {std::int64_t{0}, std::int64_t{1}, std::int64_t{513}, std::int64_t{20000}}) {
    SCOPED_TRACE(n);
    const GuardedBuffer<float> x(emulated::random_floats(static_cast<std::size_t>(n), 44));
    const double want = ops::cpu::sum_of_squares(x.data(), n);
    const double got = emulated_sum_of_squares(x, n);
    emulated::report("sum_of_squares n=" + std::to_string(n) + " relative",
                     want > 0.0 ? std::abs(got - want) / want : std::abs(got));
    EXPECT_LE(std::abs(got - want), 1e-12 * (want > 1.0 ? want : 1.0));
    EXPECT_EQ(bits_of(std::vector<double>{emulated_sum_of_squares(x, n)}),
              bits_of(std::vector<double>{got}));
  }
}

}  // namespace
}  // namespace mds
