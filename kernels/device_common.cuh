// Device-side helpers shared by the kernels: device_portable.cuh (launch shapes, deterministic
// block reductions, the storage of activations and the bf16 conversions, all free of CUDA
// includes) and here the fp16 conversions of tensor/dtype.h through cuda_fp16.h.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/device_portable.cuh"

namespace mds::kernels::detail {

__device__ inline std::uint16_t float_to_fp16_bits(float value) {
  return __half_as_ushort(__float2half_rn(value));
}

__device__ inline float fp16_bits_to_float(std::uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

__device__ inline Bytes16 load_bytes16(const void* p) {
  return *static_cast<const Bytes16*>(p);
}

__device__ inline void store_bytes16(void* p, const Bytes16& value) {
  *static_cast<Bytes16*>(p) = value;
}

__device__ inline Bytes16 load_bytes16_evict_first(const void* p) {
  const uint4 v = __ldcs(static_cast<const uint4*>(p));
  return Bytes16{{v.x, v.y, v.z, v.w}};
}

__device__ inline void store_bytes16_evict_first(void* p, const Bytes16& value) {
  __stcs(static_cast<uint4*>(p), make_uint4(value.w[0], value.w[1], value.w[2], value.w[3]));
}

}  // namespace mds::kernels::detail
