// The optimizer's gradient passes (ops/gradients.h) and the fused AdamW + cast (ops/adam.h) on the
// host: each against a per-element reference or the separate ops it fuses, bit for bit. These
// host functions are the CPU twins the GPU tests compare the kernels with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/error.h"
#include "ops/adam.h"
#include "ops/elementwise.h"
#include "ops/gradients.h"
#include "ops_test_util.h"
#include "test_support.h"
#include "train/grad_accumulation.h"

namespace mds::ops {
namespace {

using ops_test::random_floats;
using ops_test::view;
using tensor::DType;

float round_to(DType dtype, float value) {
  if (dtype == DType::kBFloat16) return tensor::to_float(tensor::to_bfloat16(value));
  if (dtype == DType::kFloat16) return tensor::to_float(tensor::to_float16(value));
  return value;
}

std::vector<tensor::Float16> to_fp16(const std::vector<float>& values) {
  std::vector<tensor::Float16> out;
  for (const float v : values) out.push_back(tensor::to_float16(v));
  return out;
}

// Bit patterns, so that NaNs compare too.
template <typename T>
std::vector<std::uint16_t> bits(const std::vector<T>& values) {
  std::vector<std::uint16_t> out;
  for (const T& v : values) out.push_back(v.bits);
  return out;
}

constexpr std::int64_t kN = 1031;  // odd, above the thread count of any OpenMP split

TEST(OpsGradients, AccumulateRoundsTheGradientThenTheSum) {
  for (const DType grad : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(tensor::dtype_name(grad));
    const auto micro = random_floats(kN, 1, -3.0f, 3.0f);
    auto acc32 = random_floats(kN, 2, -2.0f, 2.0f);
    std::vector<float> want32 = acc32;
    auto acc16 = to_fp16(random_floats(kN, 3, -2.0f, 2.0f));
    std::vector<tensor::Float16> want16 = acc16;
    for (std::int64_t i = 0; i < kN; ++i) {
      want32[i] = want32[i] + round_to(grad, micro[i]);
      want16[i] = tensor::to_float16(tensor::to_float(want16[i]) + round_to(grad, micro[i]));
    }
    auto m = micro;
    accumulate_rounded(DeviceContext{}, view(acc32, {kN}), view(m, {kN}), grad);
    accumulate_rounded(DeviceContext{}, view(acc16, {kN}), view(m, {kN}), grad);
    EXPECT_EQ(acc32, want32);
    EXPECT_EQ(bits(acc16), bits(want16));
    // The optimizer's entry point is the same pass.
    std::vector<float> again = random_floats(kN, 2, -2.0f, 2.0f);
    train::accumulate_gradient(view(again, {kN}), view(m, {kN}), grad);
    EXPECT_EQ(again, want32);
  }
}

// AccumulateSteps: fresh is a zero fill first, round_through the pass of that name after, bit for
// bit; a fresh accumulator is never read (NaNs there stay out of the result).
TEST(OpsGradients, AccumulateStepsAreTheSeparatePasses) {
  for (const DType grad : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (const DType through : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      for (const bool fresh : {false, true}) {
        SCOPED_TRACE(testing::Message() << tensor::dtype_name(grad) << " through "
                                        << tensor::dtype_name(through) << " fresh " << fresh);
        auto micro = random_floats(kN, 6, -3.0f, 3.0f);
        micro[3] = -0.0f;
        auto want32 = random_floats(kN, 7, -2.0f, 2.0f);
        auto want16 = to_fp16(random_floats(kN, 8, -2.0f, 2.0f));
        std::vector<float> got32 = want32;
        std::vector<tensor::Float16> got16 = want16;
        if (fresh) {
          std::fill(got32.begin(), got32.end(), std::nanf(""));
          std::fill(got16.begin(), got16.end(), tensor::Float16{0x7E00});
          std::fill(want32.begin(), want32.end(), 0.0f);
          std::fill(want16.begin(), want16.end(), tensor::to_float16(0.0f));
        }
        accumulate_rounded(DeviceContext{}, view(want32, {kN}), view(micro, {kN}), grad);
        accumulate_rounded(DeviceContext{}, view(want16, {kN}), view(micro, {kN}), grad);
        round_through(DeviceContext{}, view(want32, {kN}), through);
        round_through(DeviceContext{}, view(want16, {kN}), through);
        accumulate_rounded(DeviceContext{}, view(got32, {kN}), view(micro, {kN}), grad,
                           {fresh, through});
        accumulate_rounded(DeviceContext{}, view(got16, {kN}), view(micro, {kN}), grad,
                           {fresh, through});
        EXPECT_EQ(bits(got16), bits(want16));
        ASSERT_EQ(got32.size(), want32.size());
        EXPECT_EQ(std::memcmp(got32.data(), want32.data(), got32.size() * sizeof(float)), 0);
      }
    }
  }
}

TEST(OpsGradients, RoundThroughEveryDtypePair) {
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(tensor::dtype_name(dtype));
    auto x32 = random_floats(kN, 4, -70000.0f, 70000.0f);
    auto x16 = to_fp16(random_floats(kN, 5, -300.0f, 300.0f));
    std::vector<float> want32 = x32;
    std::vector<tensor::Float16> want16 = x16;
    for (std::int64_t i = 0; i < kN; ++i) {
      want32[i] = round_to(dtype, want32[i]);
      want16[i] = tensor::to_float16(round_to(dtype, tensor::to_float(want16[i])));
    }
    round_through(DeviceContext{}, view(x32, {kN}), dtype);
    round_through(DeviceContext{}, view(x16, {kN}), dtype);
    EXPECT_EQ(x32, want32);
    EXPECT_EQ(bits(x16), bits(want16));
  }
}

// The data-parallel averaging: the fp32 product or quotient rounded once to x's dtype. The
// quotient differs from the product by the reciprocal for some elements (D = 3).
TEST(OpsGradients, ScaleAndDivideInDtypeRoundTheFp32Result) {
  const auto values = random_floats(kN, 6, -70000.0f, 70000.0f);
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(tensor::dtype_name(dtype));
    std::vector<float> x = values;
    for (float& v : x) v = round_to(dtype, v / 4.0f);  // representable in dtype
    std::vector<float> scaled(kN), divided(kN);
    for (std::int64_t i = 0; i < kN; ++i) {
      scaled[i] = round_to(dtype, x[i] * (1.0f / 3.0f));
      divided[i] = round_to(dtype, x[i] / 3.0f);
    }
    std::vector<std::uint8_t> a(static_cast<std::size_t>(kN) * tensor::dtype_size(dtype)),
        b(a.size());
    const tensor::Tensor ta(a.data(), dtype, tensor::Shape{kN});
    const tensor::Tensor tb(b.data(), dtype, tensor::Shape{kN});
    cast(ta, view(x, {kN}));
    cast(tb, view(x, {kN}));
    train::scale_in_dtype(ta, 1.0 / 3.0);  // the optimizer's host entry points
    divide_in_dtype(DeviceContext{}, tb, 3.0f);
    std::vector<float> got_scaled(kN), got_divided(kN);
    cast(view(got_scaled, {kN}), ta);
    cast(view(got_divided, {kN}), tb);
    EXPECT_EQ(got_scaled, scaled);
    EXPECT_EQ(got_divided, divided);
  }
  std::vector<float> x = values;
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < kN; ++i) differ += x[i] / 3.0f != x[i] * (1.0f / 3.0f) ? 1 : 0;
  EXPECT_GT(differ, 0);  // the two ops are not one
}

TEST(OpsGradients, OverflowCheckFindsEveryNonFiniteValue) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const float bad : {inf, -inf, nan}) {
    for (const std::int64_t where : {std::int64_t{0}, std::int64_t{517}, kN - 1}) {
      auto x = random_floats(kN, 6, -60000.0f, 60000.0f);
      std::vector<tensor::BFloat16> b;
      std::vector<tensor::Float16> h;
      for (const float v : x) {
        b.push_back(tensor::to_bfloat16(v));
        h.push_back(tensor::to_float16(v));
      }
      EXPECT_FALSE(has_inf_or_nan(DeviceContext{}, view(x, {kN})));
      EXPECT_FALSE(has_inf_or_nan(DeviceContext{}, view(b, {kN})));
      EXPECT_FALSE(has_inf_or_nan(DeviceContext{}, view(h, {kN})));
      x[where] = bad;
      b[where] = tensor::to_bfloat16(bad);
      h[where] = tensor::to_float16(bad);
      EXPECT_TRUE(has_inf_or_nan(DeviceContext{}, view(x, {kN}))) << bad << " at " << where;
      EXPECT_TRUE(has_inf_or_nan(DeviceContext{}, view(b, {kN}))) << bad << " at " << where;
      EXPECT_TRUE(has_inf_or_nan(DeviceContext{}, view(h, {kN}))) << bad << " at " << where;
      EXPECT_TRUE(train::has_inf_or_nan(view(h, {kN})));
    }
  }
  // A value past fp16's range overflows only once rounded to fp16.
  std::vector<float> big = {1.0f, 70000.0f};
  EXPECT_FALSE(has_inf_or_nan(DeviceContext{}, view(big, {2})));
  std::vector<tensor::Float16> rounded = to_fp16(big);
  EXPECT_TRUE(has_inf_or_nan(DeviceContext{}, view(rounded, {2})));
  std::vector<float> empty;
  EXPECT_FALSE(has_inf_or_nan(DeviceContext{}, view(empty, {0})));
}

TEST(OpsGradients, BatchedSumsOfSquaresEqualOneCallPerSegment) {
  auto x = random_floats(100003, 7, -2.0f, 2.0f);
  const std::vector<SquaresSegment> segments = {
      {0, 100003}, {5, 0}, {64, 1}, {100, 50000}, {3, 257}, {99000, 1003}, {100, 50000}};
  const std::vector<double> sums = sums_of_squares(DeviceContext{}, view(x, {100003}), segments);
  ASSERT_EQ(sums.size(), segments.size());
  for (std::size_t k = 0; k < segments.size(); ++k) {
    const tensor::Tensor part = view(x, {100003}).narrow(segments[k].offset, segments[k].numel);
    EXPECT_EQ(sums[k], sum_of_squares(part)) << "segment " << k;
  }
  EXPECT_TRUE(sums_of_squares(DeviceContext{}, view(x, {100003}), {}).empty());
  const std::vector<SquaresSegment> outside = {{100000, 4}};
  EXPECT_EQ(testing_support::one_line_error(
                [&] { sums_of_squares(DeviceContext{}, view(x, {100003}), outside); }),
            "ops::sums_of_squares: segment [100000, 100004) is outside x's 100003 elements");
}

TEST(OpsGradients, ArgumentChecksNameTheOp) {
  std::vector<float> x(4, 1.0f);
  std::vector<std::int64_t> ids(4, 0);
  std::vector<tensor::BFloat16> b(4);
  EXPECT_EQ(testing_support::one_line_error([&] {
              accumulate_rounded(DeviceContext{}, view(b, {4}), view(x, {4}), DType::kBFloat16);
            }),
            "ops::accumulate_rounded: accumulator must be fp32 or fp16, got bfloat16");
  EXPECT_EQ(testing_support::one_line_error([&] {
              accumulate_rounded(DeviceContext{}, view(x, {4}), view(x, {4}), DType::kInt64);
            }),
            "ops::accumulate_rounded: the gradient dtype must be fp32, bf16 or fp16, got int64");
  EXPECT_EQ(testing_support::one_line_error([&] {
              accumulate_rounded(DeviceContext{}, view(x, {4}), view(x, {4}), DType::kBFloat16,
                                 {true, DType::kInt64});
            }),
            "ops::accumulate_rounded: the dtype rounded through must be fp32, bf16 or fp16, got "
            "int64");
  EXPECT_EQ(testing_support::one_line_error(
                [&] { round_through(DeviceContext{}, view(b, {4}), DType::kFloat16); }),
            "ops::round_through: x must be fp32 or fp16, got bfloat16");
  EXPECT_EQ(testing_support::one_line_error(
                [&] { scale_in_dtype(DeviceContext{}, view(ids, {4}), 0.5f); }),
            "ops::scale_in_dtype: x must be fp32, bf16 or fp16, got int64");
  EXPECT_EQ(
      testing_support::one_line_error([&] { has_inf_or_nan(DeviceContext{}, view(ids, {4})); }),
      "ops::has_inf_or_nan: x must be fp32, bf16 or fp16, got int64");
}

TEST(OpsAdamWAndCast, EqualsTheStepThenACast) {
  AdamWConfig config;
  config.lr = 3e-3f;
  config.weight_decay = 0.1f;
  for (const DType low_dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(tensor::dtype_name(low_dtype));
    auto p = random_floats(kN, 8), m = random_floats(kN, 9, -0.01f, 0.01f);
    auto v = random_floats(kN, 10, 0.0f, 1e-4f);
    auto p2 = p, m2 = m, v2 = v;
    std::vector<std::uint16_t> low(kN, 0xFFFF), want(kN, 0xFFFF);
    const tensor::Tensor low_t(low.data(), low_dtype, {kN}), want_t(want.data(), low_dtype, {kN});
    for (std::int64_t step = 1; step <= 3; ++step) {
      auto g = random_floats(kN, 20 + static_cast<std::uint32_t>(step), -0.1f, 0.1f);
      adamw_step_and_cast(DeviceContext{}, view(p, {kN}), view(g, {kN}), view(m, {kN}),
                          view(v, {kN}), config, step, low_t);
      adamw_step(view(p2, {kN}), view(g, {kN}), view(m2, {kN}), view(v2, {kN}), config, step);
      cast(want_t, view(p2, {kN}));
      EXPECT_EQ(p, p2);
      EXPECT_EQ(m, m2);
      EXPECT_EQ(v, v2);
      EXPECT_EQ(low, want);
    }
  }
  std::vector<float> x(4, 1.0f), wrong(4);
  EXPECT_EQ(testing_support::one_line_error([&] {
              adamw_step_and_cast(DeviceContext{}, view(x, {4}), view(x, {4}), view(x, {4}),
                                  view(x, {4}), config, 1, view(wrong, {4}));
            }),
            "ops::adamw_step_and_cast: low must be bf16 or fp16, got float32");
}

}  // namespace
}  // namespace mds::ops
