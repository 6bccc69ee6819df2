// Device code of kernels/elementwise.cu (launched from there) and its launch shapes, plain CUDA
// with no runtime includes so that tests/unit/kernels_emulated_elementwise_test.cpp can compile it
// for the CPU under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and
// that test only; the kernels have internal linkage, so the test's CPU build of them never meets
// the .cu's host stubs of the same names in the library.
#pragma once
#include <cstdint>
#include <type_traits>

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

constexpr int kPieceElementsPerThread = 8;

// What an element of cast_pieces_kernel is held as between its load and its store: its bits where
// the storages are equal and there is no factor (a copy), else its fp32 value.
template <Storage kOut, Storage kIn, bool kScaled>
using PieceValue =
    std::conditional_t<!kScaled && kOut == kIn,
                       std::conditional_t<kIn == Storage::kF32, std::uint32_t, std::uint16_t>,
                       float>;

template <Storage kOut, Storage kIn, bool kScaled>
__device__ inline PieceValue<kOut, kIn, kScaled> load_piece_element(const void* in,
                                                                    std::int64_t from,
                                                                    float factor) {
  using Value = PieceValue<kOut, kIn, kScaled>;
  if constexpr (std::is_same_v<Value, float>) {
    return kScaled ? load<kIn>(in, from) * factor : load<kIn>(in, from);
  } else {
    return static_cast<const Value*>(in)[from];
  }
}

template <Storage kOut, Storage kIn, bool kScaled>
__device__ inline void store_piece_element(void* out, std::int64_t to,
                                           PieceValue<kOut, kIn, kScaled> value) {
  using Value = PieceValue<kOut, kIn, kScaled>;
  if constexpr (std::is_same_v<Value, float>) {
    store<kOut>(out, to, value);
  } else {
    static_cast<Value*>(out)[to] = value;
  }
}

// The piece a thread is in: elements [first, next) of the concatenation go from in[i + from] to
// out[i + to] (the piece's offsets less its first).
struct CurrentPiece {
  std::int64_t index, next, to, from;
};

__device__ inline CurrentPiece piece_at(const PieceStart* starts, std::int64_t index) {
  const PieceStart& p = starts[index];
  return {index, starts[index + 1].first, p.out - p.first, p.in - p.first};
}

// cast_pieces_kernel's body, kScaled where factor ≠ 1. Warp w takes its own contiguous run of
// 256-element spans (so a thread's piece only moves forward: one bisection a warp, then a step
// when a span crosses into the next piece); in a span lane l takes elements l, l + 32, … (a
// warp's accesses within a piece are consecutive), issuing its eight loads before its stores.
template <Storage kOut, Storage kIn, bool kScaled>
__device__ void cast_piece_spans(void* out, const void* in, const PieceStart* starts,
                                 std::int64_t count, float factor) {
  constexpr std::int64_t kWarpElements = 32 * kPieceElementsPerThread;
  const std::int64_t total = starts[count].first;
  const std::int64_t lane = threadIdx.x % 32;
  const std::int64_t warps = grid_stride() / 32, warp = first_index() / 32;
  const std::int64_t spans = (total + kWarpElements - 1) / kWarpElements;
  const std::int64_t spans_a_warp = (spans + warps - 1) / warps;
  const std::int64_t begin = warp * spans_a_warp * kWarpElements;
  const std::int64_t end =
      begin + spans_a_warp * kWarpElements < total ? begin + spans_a_warp * kWarpElements : total;
  if (begin + lane >= end) return;
  std::int64_t lo = 0, hi = count - 1;  // the last piece starting at or before begin + lane
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (starts[mid].first <= begin + lane) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  CurrentPiece piece = piece_at(starts, lo);
  for (std::int64_t base = begin; base < end; base += kWarpElements) {
    PieceValue<kOut, kIn, kScaled> values[kPieceElementsPerThread] = {};
    std::int64_t to[kPieceElementsPerThread];
#pragma unroll
    for (int t = 0; t < kPieceElementsPerThread; ++t) {
      const std::int64_t i = base + lane + 32 * t;
      to[t] = -1;
      if (i < end) {
        while (piece.next <= i) piece = piece_at(starts, piece.index + 1);
        to[t] = piece.to + i;
        values[t] = load_piece_element<kOut, kIn, kScaled>(in, piece.from + i, factor);
      }
    }
#pragma unroll
    for (int t = 0; t < kPieceElementsPerThread; ++t) {
      if (to[t] >= 0) store_piece_element<kOut, kIn, kScaled>(out, to[t], values[t]);
    }
  }
}

// One launch for `count` pieces (starts[0 … count], count >= 1), each element times `factor`
// unless it is 1 (the fp32 product rounded once; equal storages then copy the bits).
template <Storage kOut, Storage kIn>
__global__ void cast_pieces_kernel(void* out, const void* in, const PieceStart* starts,
                                   std::int64_t count, float factor) {
  if (factor == 1.0f) {
    cast_piece_spans<kOut, kIn, false>(out, in, starts, count, factor);
  } else {
    cast_piece_spans<kOut, kIn, true>(out, in, starts, count, factor);
  }
}

// cast_pieces_kernel's: a thread per kPieceElementsPerThread elements, whole warps.
inline detail::LaunchShape pieces_launch_shape(std::int64_t total) {
  return detail::grid_stride_shape((total + kPieceElementsPerThread - 1) / kPieceElementsPerThread);
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
