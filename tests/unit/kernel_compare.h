// Random inputs and the relative error of the kernel tests, shared by the GPU tests
// (tests/gpu/gpu_test_util.h) and the emulated kernel tests (emulated_compare.h), so that both
// draw the same inputs and bound the same measure.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace mds::kernel_test {

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -3.0f,
                                        float hi = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// ‖out − ref‖₂ / ‖ref‖₂ in double (‖out − ref‖₂ alone when ref is all zeros); NaN whenever out
// holds a NaN, so a comparison with a bound then fails.
inline double relative_error(const std::vector<float>& out, const std::vector<float>& ref) {
  EXPECT_EQ(out.size(), ref.size());
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    const double d = static_cast<double>(out[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace mds::kernel_test
