// kernels/gradients.h and the fused AdamW + cast of kernels/adam.h against their CPU twins
// (ops/cpu/gradients.h, ops/cpu/adam.h): the rounding passes and the fused step bit for bit, the
// overflow flag exactly, the per-parameter sums of squares bit-identical to one
// kernels::sum_of_squares per segment and within 1e-12 of the CPU's double sums.
#include "kernels/gradients.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/adam.h"
#include "ops/cpu/adam.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/gradients.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::flat_sizes;
using gpu_test::random_floats;
using tensor::DType;

constexpr DType kFloatDtypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};

// `values` converted to `dtype` as raw bytes (ops/cpu's cast).
std::vector<std::uint8_t> as_bytes(const std::vector<float>& values, DType dtype) {
  std::vector<std::uint8_t> out(values.size() * tensor::dtype_size(dtype));
  ops::cpu::cast(out.data(), dtype, values.data(), DType::kFloat32,
                 static_cast<std::int64_t>(values.size()));
  return out;
}

TEST(GpuGradients, AccumulateRoundedIsBitIdenticalToCpu) {
  for (const std::int64_t n : flat_sizes()) {
    const auto un = static_cast<std::size_t>(n);
    const auto micro = random_floats(un, 60, -70000.0f, 70000.0f);
    for (const DType accumulator : {DType::kFloat32, DType::kFloat16}) {
      for (const DType grad : kFloatDtypes) {
        SCOPED_TRACE(testing::Message() << tensor::dtype_name(accumulator)
                                        << " += " << tensor::dtype_name(grad) << " n=" << n);
        std::vector<std::uint8_t> cpu = as_bytes(random_floats(un, 61, -5.0f, 5.0f), accumulator);
        DeviceArray<std::uint8_t> dacc(cpu);
        DeviceArray<float> dmicro(micro);
        for (int round = 0; round < 2; ++round) {  // twice: the sum is read back too
          ops::cpu::accumulate_rounded(cpu.data(), accumulator, micro.data(), n, grad);
          kernels::accumulate_rounded(dacc.get(), accumulator, dmicro.get(), n, grad, nullptr);
        }
        EXPECT_EQ(dacc.download(), cpu);
      }
    }
  }
}

// The folded steps: a fresh accumulator (never read: NaNs there stay out) and the round trip.
TEST(GpuGradients, AccumulateStepsAreBitIdenticalToCpu) {
  for (const std::int64_t n : flat_sizes()) {
    const auto un = static_cast<std::size_t>(n);
    auto micro = random_floats(un, 63, -70000.0f, 70000.0f);
    if (un > 2) micro[1] = -0.0f;
    for (const DType accumulator : {DType::kFloat32, DType::kFloat16}) {
      for (const DType through : kFloatDtypes) {
        for (const bool fresh : {false, true}) {
          SCOPED_TRACE(testing::Message()
                       << tensor::dtype_name(accumulator) << " through "
                       << tensor::dtype_name(through) << " fresh " << fresh << " n=" << n);
          std::vector<std::uint8_t> cpu = as_bytes(random_floats(un, 64, -5.0f, 5.0f), accumulator);
          DeviceArray<std::uint8_t> dacc(fresh ? std::vector<std::uint8_t>(cpu.size(), 0xFF)
                                               : cpu);  // 0xFF…: NaNs
          DeviceArray<float> dmicro(micro);
          ops::cpu::accumulate_rounded(cpu.data(), accumulator, micro.data(), n, DType::kBFloat16,
                                       fresh, through);
          kernels::accumulate_rounded(dacc.get(), accumulator, dmicro.get(), n, DType::kBFloat16,
                                      nullptr, fresh, through);
          EXPECT_EQ(dacc.download(), cpu);
        }
      }
    }
  }
}

TEST(GpuGradients, RoundThroughIsBitIdenticalToCpu) {
  for (const std::int64_t n : flat_sizes()) {
    const auto un = static_cast<std::size_t>(n);
    const auto values = random_floats(un, 62, -70000.0f, 70000.0f);
    for (const DType x_dtype : {DType::kFloat32, DType::kFloat16}) {
      for (const DType dtype : kFloatDtypes) {
        SCOPED_TRACE(testing::Message() << tensor::dtype_name(x_dtype) << " through "
                                        << tensor::dtype_name(dtype) << " n=" << n);
        std::vector<std::uint8_t> cpu = as_bytes(values, x_dtype);
        DeviceArray<std::uint8_t> dx(cpu);
        ops::cpu::round_through(cpu.data(), x_dtype, n, dtype);
        kernels::round_through(dx.get(), x_dtype, n, dtype, nullptr);
        EXPECT_EQ(dx.download(), cpu);
      }
    }
  }
}

TEST(GpuGradients, ScaleAndDivideInDtypeAreBitIdenticalToCpu) {
  for (const std::int64_t n : flat_sizes()) {
    const auto un = static_cast<std::size_t>(n);
    const auto values = random_floats(un, 63, -70000.0f, 70000.0f);
    for (const DType dtype : kFloatDtypes) {
      for (const bool divide : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << tensor::dtype_name(dtype) << (divide ? " / 3" : " * 1/3") << " n=" << n);
        const float operand = divide ? 3.0f : 1.0f / 3.0f;
        std::vector<std::uint8_t> cpu = as_bytes(values, dtype);
        DeviceArray<std::uint8_t> dx(cpu);
        ops::cpu::scale_in_dtype(cpu.data(), dtype, n, operand, divide);
        kernels::scale_in_dtype(dx.get(), dtype, n, operand, divide, nullptr);
        EXPECT_EQ(dx.download(), cpu);
      }
    }
  }
}

TEST(GpuGradients, OverflowFlagMatchesCpu) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::int64_t n : flat_sizes()) {
    const auto un = static_cast<std::size_t>(n);
    for (const DType dtype : kFloatDtypes) {
      // Finite everywhere (fp16 values stay below its 65504 maximum), then one bad element at the
      // start, the middle, the end.
      const auto base = random_floats(un, 63, -60000.0f, 60000.0f);
      std::vector<std::vector<float>> cases = {base};
      for (const float bad : {inf, -inf, nan}) {
        for (const std::size_t at : {std::size_t{0}, un / 2, un - 1}) {
          cases.push_back(base);
          cases.back()[at] = bad;
        }
      }
      for (std::size_t c = 0; c < cases.size(); ++c) {
        SCOPED_TRACE(testing::Message()
                     << tensor::dtype_name(dtype) << " n=" << n << " case " << c);
        const std::vector<std::uint8_t> bytes = as_bytes(cases[c], dtype);
        DeviceArray<std::uint8_t> dx(bytes);
        const bool want = ops::cpu::has_inf_or_nan(bytes.data(), dtype, n);
        EXPECT_EQ(want, c != 0);
        EXPECT_EQ(kernels::has_inf_or_nan(dx.get(), dtype, n, nullptr), want);
        // The flag is only ever set, never cleared: a set flag stays set over a clean buffer.
        DeviceArray<int> flag(std::vector<int>{0});
        kernels::flag_inf_or_nan(flag.get(), dx.get(), dtype, n, nullptr);
        EXPECT_EQ(flag.download()[0], want ? 1 : 0);
      }
    }
  }
  DeviceArray<int> flag(std::vector<int>{1});
  DeviceArray<float> clean(std::vector<float>{1.0f, 2.0f});
  kernels::flag_inf_or_nan(flag.get(), clean.get(), DType::kFloat32, 2, nullptr);
  EXPECT_EQ(flag.download()[0], 1);
}

TEST(GpuGradients, SumsOfSquaresEqualOneSumPerSegmentAndAreDeterministic) {
  constexpr std::int64_t kN = (1 << 20) + 4099;
  const auto x = random_floats(static_cast<std::size_t>(kN), 64, -2.0f, 2.0f);
  // Empty, single-element, overlapping, whole-buffer and block-straddling segments.
  const std::vector<ops::SquaresSegment> segments = {{0, kN},           {7, 0},      {64, 1},
                                                     {100, 511},        {100, 513},  {1000, 65537},
                                                     {kN - 4099, 4099}, {3, 1 << 20}};
  const auto count = static_cast<std::int64_t>(segments.size());
  std::vector<double> cpu(segments.size());
  ops::cpu::sums_of_squares(cpu.data(), x.data(), DType::kFloat32, segments.data(), count);
  DeviceArray<float> dx(x);
  std::vector<double> got(segments.size(), std::nan(""));
  kernels::sums_of_squares_to_host(got.data(), dx.get(), segments.data(), count, nullptr);
  DeviceArray<ops::SquaresSegment> dsegments(segments);
  DeviceArray<double> out(segments.size()),
      partials(segments.size() * kernels::kSumOfSquaresPartials);  // poisoned: NaN
  kernels::sums_of_squares(out.get(), partials.get(), dx.get(), dsegments.get(), count, nullptr);
  const std::vector<double> again = out.download();
  for (std::size_t k = 0; k < segments.size(); ++k) {
    SCOPED_TRACE(k);
    const double single =
        kernels::sum_of_squares(dx.get() + segments[k].offset, segments[k].numel, nullptr);
    EXPECT_EQ(got[k], single);
    EXPECT_EQ(again[k], single);
    EXPECT_LE(std::abs(got[k] - cpu[k]), 1e-12 * (cpu[k] > 1.0 ? cpu[k] : 1.0));
  }
}

TEST(GpuAdam, AdamWStepAndCastMatchesCpu) {
  ops::AdamWConfig config;
  config.lr = 3e-3f;
  config.weight_decay = 0.1f;
  for (const DType low : {DType::kBFloat16, DType::kFloat16}) {
    for (const std::int64_t n : flat_sizes()) {
      SCOPED_TRACE(testing::Message() << tensor::dtype_name(low) << " n=" << n);
      const auto un = static_cast<std::size_t>(n);
      auto params = random_floats(un, 70), exp_avg = random_floats(un, 71, -0.01f, 0.01f);
      auto exp_avg_sq = random_floats(un, 72, 0.0f, 1e-4f);
      const auto grads = random_floats(un, 73, -0.1f, 0.1f);
      DeviceArray<float> dp(params), dm(exp_avg), dv(exp_avg_sq), dg(grads);
      std::vector<std::uint16_t> cpu_low(un);
      DeviceArray<std::uint16_t> dlow(un);  // poisoned
      for (std::int64_t step = 1; step <= 3; ++step) {
        const auto bc1 = static_cast<float>(1.0 - std::pow(double{config.beta1}, step));
        const auto bc2 = static_cast<float>(1.0 - std::pow(double{config.beta2}, step));
        ops::cpu::adamw_step_and_cast(params.data(), grads.data(), exp_avg.data(),
                                      exp_avg_sq.data(), n, config, bc1, bc2, cpu_low.data(), low);
        kernels::adamw_step_and_cast(dp.get(), dg.get(), dm.get(), dv.get(), n, config, bc1, bc2,
                                     dlow.get(), low, nullptr);
      }
      EXPECT_EQ(dp.download(), params);
      EXPECT_EQ(dm.download(), exp_avg);
      EXPECT_EQ(dv.download(), exp_avg_sq);
      EXPECT_EQ(dlow.download(), cpu_low);
    }
  }
}

}  // namespace
}  // namespace mds
