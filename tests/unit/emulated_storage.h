// 16-bit storage for the attention kernels run under the CPU emulation (kernels/attention_io.cuh's
// policies): the host twin of the device's Bits16Io, and the comparison of 16-bit results by ulps.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops_16bit_util.h"
#include "tensor/dtype.h"
#include "tensor/round_to.h"

namespace mds::emulated {

// device_common.cuh's conversions are tensor::to_bfloat16's and round-to-nearest-even fp16
// (tensor::to_float16's).
template <typename T>
struct HostBits16Io {
  using Elem = T;
  static float load(const T* p, std::int64_t i) { return tensor::to_float(p[i]); }
  static void store(T* p, std::int64_t i, float value) { p[i] = tensor::round_to<T>(value); }
};

template <typename T>
std::vector<std::uint16_t> bits(const std::vector<T>& v) {
  std::vector<std::uint16_t> out;
  for (const T x : v) out.push_back(x.bits);
  return out;
}

template <typename T>
std::vector<float> widened(const std::vector<T>& v) {
  std::vector<float> out;
  for (const T x : v) out.push_back(tensor::to_float(x));
  return out;
}

// Sign-magnitude bits to a monotonic integer: neighbours differ by one.
inline int ordered(std::uint16_t b) {
  return (b & 0x8000) != 0 ? -static_cast<int>(b & 0x7FFF) : static_cast<int>(b);
}

// The elements of got[first + k·stride + [0, width)] that are not finite or more than one ulp of
// T from want and farther than 1e-4·rms(want) (where want is near zero: the rule of
// tests/gpu/activations_16bit_test.cpp).
template <typename T>
std::size_t count_beyond_one_ulp(const std::vector<T>& got, const std::vector<T>& want,
                                 std::size_t first, std::size_t width, std::size_t stride) {
  double sq = 0.0;
  for (const T x : want) sq += static_cast<double>(tensor::to_float(x)) * tensor::to_float(x);
  const double floor = 1e-4 * std::sqrt(sq / static_cast<double>(want.size() + 1));
  std::size_t beyond = 0;
  for (std::size_t base = first; base < got.size(); base += stride) {
    for (std::size_t i = base; i < base + width; ++i) {
      const float g = tensor::to_float(got[i]), w = tensor::to_float(want[i]);
      if (!std::isfinite(g)) {
        ++beyond;
      } else if (std::abs(ordered(got[i].bits) - ordered(want[i].bits)) > 1 &&
                 std::fabs(static_cast<double>(g) - w) > floor) {
        ++beyond;
      }
    }
  }
  return beyond;
}

}  // namespace mds::emulated
