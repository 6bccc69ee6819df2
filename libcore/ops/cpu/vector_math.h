// exp and tanh written so that loops calling them vectorize (no libm call, no branches), for the
// elementwise ops whose cost is mostly libm: the softmaxes and the GELU. Both are within 2 ulp of
// the correctly rounded result for the arguments these ops see (tests/unit/ops_vector_math_test).
// The same code runs in every lane and in the scalar remainder, so a result never depends on how
// a loop was split over threads or vector lanes.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

// Compiles a function twice, for AVX2 and for the baseline x86-64, picking one at load time: the
// loops above run 8 floats per instruction instead of 4 where the CPU allows. Both versions do the
// same IEEE operations in the same order (no FMA contraction: -std=c++20 keeps it off in GCC, and
// AVX2 alone has no FMA for clang to contract into), so results do not depend on the CPU.
// Function templates cannot be cloned (clang 14); clone a plain function that calls them, inlined
// (MDS_ALWAYS_INLINE).
#if defined(__x86_64__)
#define MDS_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MDS_VECTOR_CLONES
#endif
// What a cloned function calls must be inlined into each clone to be compiled for its target.
#define MDS_ALWAYS_INLINE __attribute__((always_inline))

namespace mds::ops::cpu {

// e^x: x = n·ln2 + r with |r| ≤ ln2/2 (Cody–Waite, ln2 in two parts), e^r by its degree-7 Taylor
// polynomial, 2^n built in the exponent bits as 2^(n−1)·2 so that n = 128 does not overflow
// early. Flushes to +0 below −86.9 (the subnormal end of the range is not worth a branch),
// +inf above 88.72 as float overflows; NaN stays NaN.
MDS_ALWAYS_INLINE inline float vector_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  constexpr float kLow = -86.9f, kHigh = 88.72f;
  // NaN takes the path of 0 (converting NaN to an integer is undefined) and is restored below.
  const float finite = x != x ? 0.0f : x;
  const float clamped = finite < kLow ? kLow : (finite > kHigh ? kHigh : finite);
  const float n = (clamped * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const auto biased = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 126);
  float result = p * std::bit_cast<float>(biased << 23) * 2.0f;
  // Selects, not branches, so that the loops calling this still vectorize.
  result = x < kLow ? 0.0f : result;
  result = x > kHigh ? INFINITY : result;
  return x != x ? x : result;
}

// tanh(x) = sign(x)·(1 − e)/(1 + e), e = e^(−2|x|): absolute error below 2^-23, which is all a
// GELU needs (tanh is only ever added to 1 there).
MDS_ALWAYS_INLINE inline float vector_tanh(float x) {
  const float e = vector_exp(-2.0f * std::fabs(x));
  const float t = (1.0f - e) / (1.0f + e);
  return x < 0.0f ? -t : t;
}

}  // namespace mds::ops::cpu
