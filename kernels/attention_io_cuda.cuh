// The 16-bit storage policies of the attention kernels (attention_io.cuh) on a device, and the
// dispatch from a tensor dtype to a policy. Included by the .cu files only.
#pragma once
#include <cstdint>

#include "kernels/attention_io.cuh"
#include "kernels/device_common.cuh"
#include "tensor/dtype.h"

namespace mds::kernels::attention_io {

// kBF16 or kF16 storage through device_common.cuh's conversions.
template <detail::Storage kS>
struct Bits16Io {
  using Elem = std::uint16_t;
  __device__ static float load(const Elem* p, std::int64_t i) { return detail::load<kS>(p, i); }
  __device__ static void store(Elem* p, std::int64_t i, float value) {
    detail::store<kS>(p, i, value);
  }
};

// Calls body(Io{}) with the policy for `dtype`: Fp32Io for fp32 (the fp32 kernels as they were),
// Bits16Io for bf16 and fp16; other dtypes fail with one line naming the kernel.
template <typename Body>
void with_io(tensor::DType dtype, const char* kernel, Body body) {
  detail::with_storage(dtype, kernel, [&](auto s) {
    constexpr detail::Storage kS = decltype(s)::value;
    if constexpr (kS == detail::Storage::kF32) {
      body(Fp32Io{});
    } else {
      body(Bits16Io<kS>{});
    }
  });
}

}  // namespace mds::kernels::attention_io
