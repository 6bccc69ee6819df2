// Device code of kernels/elementwise.cu (launched from there) and its launch shapes, plain CUDA
// with no runtime includes so that tests/unit/kernels_emulated_elementwise_test.cpp can compile it
// for the CPU under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and
// that test only; the kernels have internal linkage, so the test's CPU build of them never meets
// the .cu's host stubs of the same names in the library.
#pragma once
#include <cstdint>

#include "kernels/device_portable.cuh"
#include "tensor/dtype.h"

namespace mds::kernels::elementwise_detail {
namespace {

using detail::load;
using detail::Storage;
using detail::store;

__device__ inline std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

template <Storage kS>
__global__ void add_kernel(void* out, const void* a, const void* b, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    store<kS>(out, i, load<kS>(a, i) + load<kS>(b, i));
}

template <Storage kS>
__global__ void scale_kernel(void* out, const void* x, float factor, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    store<kS>(out, i, load<kS>(x, i) * factor);
}

__global__ void fill_kernel(float* out, float value, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = value;
}

__global__ void fill16_kernel(std::uint16_t* out, std::uint16_t bits, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = bits;
}

template <Storage kOut, Storage kIn>
__global__ void cast_kernel(void* out, const void* x, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    store<kOut>(out, i, load<kIn>(x, i));
}

// Every kernel here is a grid-stride loop over the n elements.
inline detail::LaunchShape launch_shape(std::int64_t n) {
  return detail::grid_stride_shape(n);
}

// fill16_kernel's pattern: the host twin of detail::float_to_*_bits.
inline std::uint16_t bits16(float value, Storage storage) {
  return storage == Storage::kBF16 ? tensor::to_bfloat16(value).bits
                                   : tensor::to_float16(value).bits;
}

}  // namespace
}  // namespace mds::kernels::elementwise_detail
