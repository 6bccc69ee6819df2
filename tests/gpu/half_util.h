// Helpers for the GPU tests of 16-bit ops: inputs rounded to bf16/fp16, outputs poisoned with
// NaNs, and the comparisons of 16-bit device results with their host twins.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/device_context.h"
#include "tensor/round_to.h"
#include "tests/gpu/device_tensors.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds::gpu_test {

// The 16-bit storage types the typed tests run over.
using HalfTypes = ::testing::Types<tensor::BFloat16, tensor::Float16>;

// An fp32 Mirrored tensor's device values against its host values.
#define EXPECT_FP32_CLOSE(ctx, t, bound) MDS_EXPECT_CLOSE((t).download(ctx), (t).host, bound)

template <typename T>
std::vector<T> halves(std::size_t n, std::uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::vector<T> v;
  for (const float x : random_floats(n, seed, lo, hi)) v.push_back(tensor::round_to<T>(x));
  return v;
}

// 0xFFFF: a NaN in bf16 and in fp16, so an element left unwritten shows.
template <typename T>
std::vector<T> poisoned(std::size_t n) {
  return std::vector<T>(n, T{0xFFFF});
}

template <typename T>
std::vector<std::uint16_t> bits(const std::vector<T>& v) {
  std::vector<std::uint16_t> out;
  for (const T x : v) out.push_back(x.bits);
  return out;
}

// Device and host results bit for bit.
template <typename T>
void expect_identical(const ops::DeviceContext& ctx, const Mirrored<T>& t,
                      const std::string& what) {
  EXPECT_EQ(bits(t.download(ctx)), bits(t.host)) << what;
}

// Sign-magnitude bits to a monotonic integer: neighbours differ by one.
inline int ordered(std::uint16_t b) {
  return (b & 0x8000) != 0 ? -static_cast<int>(b & 0x7FFF) : static_cast<int>(b);
}

// 1e-4·rms(host): where the host value is near zero a 16-bit ulp can be smaller than an fp32
// summation-order difference, so the comparisons accept this absolute difference too.
template <typename T>
double near_zero_floor(const std::vector<T>& host) {
  double sq = 0.0;
  for (const T x : host) sq += static_cast<double>(tensor::to_float(x)) * tensor::to_float(x);
  return 1e-4 * std::sqrt(sq / static_cast<double>(host.size() + 1));
}

// At most one ulp of T apart, or within 1e-4·rms(host) where the host value is near zero (there
// a 16-bit ulp can be smaller than an fp32 summation-order difference).
template <typename T>
void expect_one_ulp(const ops::DeviceContext& ctx, const Mirrored<T>& t, const std::string& what) {
  const std::vector<T> got = t.download(ctx);
  const double floor = near_zero_floor(t.host);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float g = tensor::to_float(got[i]), w = tensor::to_float(t.host[i]);
    ASSERT_TRUE(std::isfinite(g)) << what << " at " << i << " (left unwritten?)";
    if (std::abs(ordered(got[i].bits) - ordered(t.host[i].bits)) <= 1) continue;
    ASSERT_LE(std::fabs(static_cast<double>(g) - w), floor)
        << what << " at " << i << ": device " << g << ", host " << w;
  }
}

// The spacing of T's values at |x| (T's 8 or 11 significant bits), at most T's smallest.
template <typename T>
double ulp_at(double x) {
  constexpr int kBits = std::is_same_v<T, tensor::BFloat16> ? 8 : 11;
  constexpr double kSmallest = std::is_same_v<T, tensor::BFloat16> ? 0x1p-133 : 0x1p-24;
  int exponent = 0;
  std::frexp(std::fabs(x), &exponent);  // |x| = m · 2^exponent, m in [0.5, 1)
  return std::max(std::ldexp(1.0, exponent - kBits), kSmallest);
}

// For a 16-bit product that cuBLASLt finishes with an addition (the bias epilogue, beta·C): on an
// H100 (CUDA 13.0) some of its algorithms round the product, or parts of it, to 16 bits before
// they add, so a value can sit several ulps of the sum from the once-rounded host value where the
// sum cancels (7 bf16 ulps seen). Each device value must be within two ulps of the larger of
// its two terms, |product[i]| (the host's rounded product alone) and |addend[i]|, or under the
// near-zero floor: what rounding the terms allows, while a wrong element is off by a term's
// size. Prints how many values were past one ulp of the once-rounded result.
template <typename T>
void expect_within_term_ulps(const ops::DeviceContext& ctx, const Mirrored<T>& t,
                             const std::vector<T>& product, const std::vector<T>& addend,
                             std::size_t addend_period, const std::string& what) {
  const std::vector<T> got = t.download(ctx);
  ASSERT_EQ(product.size(), got.size()) << what;
  const double floor = near_zero_floor(t.host);
  std::size_t past_one_ulp = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float g = tensor::to_float(got[i]), w = tensor::to_float(t.host[i]);
    ASSERT_TRUE(std::isfinite(g)) << what << " at " << i << " (left unwritten?)";
    if (std::abs(ordered(got[i].bits) - ordered(t.host[i].bits)) <= 1) continue;
    ++past_one_ulp;
    const double term = std::max(std::fabs(tensor::to_float(product[i])),
                                 std::fabs(tensor::to_float(addend[i % addend_period])));
    ASSERT_LE(std::fabs(static_cast<double>(g) - w), std::max(2.0 * ulp_at<T>(term), floor))
        << what << " at " << i << ": device " << g << ", host " << w << ", product "
        << tensor::to_float(product[i]) << ", addend "
        << tensor::to_float(addend[i % addend_period]);
  }
  if (past_one_ulp > 0) {
    std::printf("[ measured ] %s: %zu of %zu values past one ulp of the once-rounded result\n",
                what.c_str(), past_one_ulp, got.size());
  }
}

}  // namespace mds::gpu_test
