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

// The pieces of cast_pieces_kernel: piece k casts elements [first, next first) of the pieces one
// after another, from in[in …] to out[out …]. A last entry holds the total in `first`.
struct PieceStart {
  std::int64_t first, out, in;
};

// Element `from` of `in` cast to element `to` of `out`; equal storages copy the bits.
template <Storage kOut, Storage kIn>
__device__ inline void cast_element(void* out, std::int64_t to, const void* in, std::int64_t from) {
  if constexpr (kOut == kIn && kIn == Storage::kF32) {
    static_cast<std::uint32_t*>(out)[to] = static_cast<const std::uint32_t*>(in)[from];
  } else if constexpr (kOut == kIn) {
    static_cast<std::uint16_t*>(out)[to] = static_cast<const std::uint16_t*>(in)[from];
  } else {
    store<kOut>(out, to, load<kIn>(in, from));
  }
}

constexpr int kPieceElementsPerThread = 8;

// One launch for `count` pieces (starts[0 … count], count >= 1), each element times `factor`
// unless it is 1 (the fp32 product rounded once): each warp takes 256 consecutive
// elements of the pieces' concatenation, lane l elements l, l + 32, … of them, so that a warp's
// accesses within a piece are consecutive. A thread finds the piece of its first element by
// bisection over the starts and steps forward from there.
template <Storage kOut, Storage kIn>
__global__ void cast_pieces_kernel(void* out, const void* in, const PieceStart* starts,
                                   std::int64_t count, float factor) {
  constexpr std::int64_t kWarpElements = 32 * kPieceElementsPerThread;
  const std::int64_t total = starts[count].first;
  const std::int64_t lane = threadIdx.x % 32;
  for (std::int64_t base = first_index() / 32 * kWarpElements; base < total;
       base += grid_stride() / 32 * kWarpElements) {
    std::int64_t lo = 0, hi = count - 1;  // the last piece starting at or before base + lane
    while (lo < hi) {
      const std::int64_t mid = (lo + hi + 1) / 2;
      if (starts[mid].first <= base + lane) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    for (std::int64_t i = base + lane; i < total && i < base + kWarpElements; i += 32) {
      while (starts[lo + 1].first <= i) ++lo;
      const std::int64_t offset = i - starts[lo].first;
      if (factor == 1.0f) {
        cast_element<kOut, kIn>(out, starts[lo].out + offset, in, starts[lo].in + offset);
      } else {
        store<kOut>(out, starts[lo].out + offset, load<kIn>(in, starts[lo].in + offset) * factor);
      }
    }
  }
}

// Every kernel here is a grid-stride loop over the n elements.
inline detail::LaunchShape launch_shape(std::int64_t n) {
  return detail::grid_stride_shape(n);
}

// cast_pieces_kernel's: a thread per kPieceElementsPerThread elements, whole warps.
inline detail::LaunchShape pieces_launch_shape(std::int64_t total) {
  return detail::grid_stride_shape((total + kPieceElementsPerThread - 1) / kPieceElementsPerThread);
}

// fill16_kernel's pattern: the host twin of detail::float_to_*_bits.
inline std::uint16_t bits16(float value, Storage storage) {
  return storage == Storage::kBF16 ? tensor::to_bfloat16(value).bits
                                   : tensor::to_float16(value).bits;
}

}  // namespace
}  // namespace mds::kernels::elementwise_detail
