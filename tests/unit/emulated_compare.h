// Inputs and comparisons of the emulated kernel tests (kernels_emulated_*_test.cpp): seeded random
// values, the storages fp32/bf16/fp16 as element types, the relative error the GPU tests bound
// (tests/gpu/gpu_test_util.h's, NaN whenever an output holds one) and a report of the measured
// errors (set MDS_SIMT_REPORT=1 to print them).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/device_portable.cuh"
#include "tensor/dtype.h"
#include "tensor/round_to.h"
#include "tests/unit/emulated_storage.h"
#include "tests/unit/kernel_compare.h"

namespace mds::emulated {

using kernel_test::random_floats;

// The element type and dtype of a kernel's storage, and the host's widening and rounding.
template <kernels::detail::Storage kS>
struct StorageOf;
template <>
struct StorageOf<kernels::detail::Storage::kF32> {
  using Elem = float;
  static constexpr tensor::DType kDType = tensor::DType::kFloat32;
  static float widen(float x) { return x; }
  static float round(float x) { return x; }
};
template <>
struct StorageOf<kernels::detail::Storage::kBF16> {
  using Elem = tensor::BFloat16;
  static constexpr tensor::DType kDType = tensor::DType::kBFloat16;
  static float widen(Elem x) { return tensor::to_float(x); }
  static Elem round(float x) { return tensor::to_bfloat16(x); }
};
template <>
struct StorageOf<kernels::detail::Storage::kF16> {
  using Elem = tensor::Float16;
  static constexpr tensor::DType kDType = tensor::DType::kFloat16;
  static float widen(Elem x) { return tensor::to_float(x); }
  static Elem round(float x) { return tensor::to_float16(x); }
};

// fp32 values rounded to the storage, and back.
template <kernels::detail::Storage kS>
std::vector<typename StorageOf<kS>::Elem> to_storage(const std::vector<float>& values) {
  std::vector<typename StorageOf<kS>::Elem> out;
  for (const float x : values) out.push_back(StorageOf<kS>::round(x));
  return out;
}

template <kernels::detail::Storage kS>
std::vector<float> to_fp32(const std::vector<typename StorageOf<kS>::Elem>& values) {
  std::vector<float> out;
  for (const auto x : values) out.push_back(StorageOf<kS>::widen(x));
  return out;
}

// Calls body(storage as a compile-time constant) for fp32, bf16 and fp16.
template <typename Body>
void for_each_storage(Body body) {
  for (const tensor::DType dtype :
       {tensor::DType::kFloat32, tensor::DType::kBFloat16, tensor::DType::kFloat16}) {
    kernels::detail::with_storage(dtype, "test", body);
  }
}

inline const char* storage_name(kernels::detail::Storage s) {
  switch (s) {
    case kernels::detail::Storage::kF32:
      return "fp32";
    case kernels::detail::Storage::kBF16:
      return "bf16";
    case kernels::detail::Storage::kF16:
      return "fp16";
  }
  return "?";
}

// The bits of each element, to compare outputs bit for bit (NaN included).
template <typename T>
std::vector<std::uint64_t> bits_of(const std::vector<T>& values) {
  std::vector<std::uint64_t> out;
  for (const T& x : values) {
    std::uint64_t b = 0;
    std::memcpy(&b, &x, sizeof(T));
    out.push_back(b);
  }
  return out;
}

using kernel_test::relative_error;

inline void report(const std::string& what, double error) {
  static const bool enabled = std::getenv("MDS_SIMT_REPORT") != nullptr;
  if (enabled) std::fprintf(stderr, "simt-report %s: %.3g\n", what.c_str(), error);
}

// out within `bound` of ref in relative error, every element finite.
inline void expect_close(const std::vector<float>& out, const std::vector<float>& ref, double bound,
                         const std::string& what) {
  std::size_t non_finite = 0;
  for (const float x : out) non_finite += std::isfinite(x) ? 0 : 1;
  EXPECT_EQ(non_finite, 0u) << what;
  const double error = relative_error(out, ref);
  report(what, error);
  EXPECT_LE(error, bound) << what;
}

// A kernel's activation output against its fp32 reference: within `bound` in fp32; in bf16 or
// fp16, within one ulp of the reference rounded once (or 1e-4·rms of it near zero:
// tests/gpu/activations_16bit_test.cpp's rule for outputs that differ by the transcendentals and
// the summation order).
template <kernels::detail::Storage kS>
void expect_activation_close(const std::vector<typename StorageOf<kS>::Elem>& got,
                             const std::vector<float>& want, double bound,
                             const std::string& what) {
  if constexpr (kS == kernels::detail::Storage::kF32) {
    expect_close(got, want, bound, what);
  } else {
    report(what, relative_error(to_fp32<kS>(got), want));
    EXPECT_EQ(count_beyond_one_ulp(got, to_storage<kS>(want), 0, got.size(), got.size() + 1), 0u)
        << what;
  }
}

// The same where the arithmetic is the CPU's exactly: the reference rounded once, bit for bit.
template <kernels::detail::Storage kS>
void expect_activation_equal(const std::vector<typename StorageOf<kS>::Elem>& got,
                             const std::vector<float>& want, const std::string& what) {
  EXPECT_EQ(bits_of(got), bits_of(to_storage<kS>(want))) << what;
}

}  // namespace mds::emulated
