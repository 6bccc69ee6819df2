// Device code of kernels/gradients.cu (launched from there) and its launch shapes, plain CUDA with
// no runtime includes so that tests/unit/kernels_emulated_gradients_test.cpp can compile it for
// the CPU under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and that
// test only; the kernels have internal linkage (see elementwise_kernels.cuh).
#pragma once
#include <cstdint>

#include "kernels/device_portable.cuh"
#include "kernels/sum_of_squares.cuh"
#include "kernels/sum_of_squares_partials.h"
#include "ops/gradients.h"
#include "tensor/dtype.h"

namespace mds::kernels::gradients_detail {
namespace {

using detail::kWarps;

// The dtypes a kernel below branches on, as a small enum the device code can switch over.
enum class Half : int { kNone, kBf16, kFp16 };

inline Half half_of(tensor::DType dtype) {
  return dtype == tensor::DType::kBFloat16  ? Half::kBf16
         : dtype == tensor::DType::kFloat16 ? Half::kFp16
                                            : Half::kNone;
}

__device__ inline float round_to(Half dtype, float value) {
  switch (dtype) {
    case Half::kBf16:
      return detail::bf16_bits_to_float(detail::float_to_bf16_bits(value));
    case Half::kFp16:
      return detail::fp16_bits_to_float(detail::float_to_fp16_bits(value));
    case Half::kNone:
      break;
  }
  return value;
}

__device__ inline std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ inline std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// kernels::accumulate_rounded's arguments: the gradient dtype, whether the accumulator is fresh
// (written as if it held zeros, not read), the dtype each result is rounded through.
struct AccumulateHow {
  Half grad;
  bool fresh;
  Half through;
};

// old + G(micro), or for a fresh accumulator 0 + G(micro) (a −0 gives +0; spelled out, so that no
// compiler may drop the addition).
__device__ inline float accumulated(float old, float micro, const AccumulateHow& how) {
  const float g = round_to(how.grad, micro);
  return how.fresh ? (g == 0.0f ? 0.0f : g) : old + g;
}

__global__ void accumulate_fp32_kernel(float* accumulator, const float* micro, std::int64_t n,
                                       AccumulateHow how) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const float old = how.fresh ? 0.0f : accumulator[i];
    accumulator[i] = round_to(how.through, accumulated(old, micro[i], how));
  }
}

__global__ void accumulate_fp16_kernel(std::uint16_t* accumulator, const float* micro,
                                       std::int64_t n, AccumulateHow how) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const float old = how.fresh ? 0.0f : detail::fp16_bits_to_float(accumulator[i]);
    const std::uint16_t sum = detail::float_to_fp16_bits(accumulated(old, micro[i], how));
    accumulator[i] =
        how.through == Half::kNone
            ? sum
            : detail::float_to_fp16_bits(round_to(how.through, detail::fp16_bits_to_float(sum)));
  }
}

__global__ void round_through_fp32_kernel(float* x, std::int64_t n, Half dtype) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) x[i] = round_to(dtype, x[i]);
}

__global__ void round_through_fp16_kernel(std::uint16_t* x, std::int64_t n, Half dtype) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    x[i] = detail::float_to_fp16_bits(round_to(dtype, detail::fp16_bits_to_float(x[i])));
  }
}

__device__ inline float load_as_float(const void* x, Half dtype, std::int64_t i) {
  switch (dtype) {
    case Half::kBf16:
      return detail::bf16_bits_to_float(static_cast<const std::uint16_t*>(x)[i]);
    case Half::kFp16:
      return detail::fp16_bits_to_float(static_cast<const std::uint16_t*>(x)[i]);
    case Half::kNone:
      break;
  }
  return static_cast<const float*>(x)[i];
}

__device__ inline void store_rounded(void* x, Half dtype, std::int64_t i, float value) {
  switch (dtype) {
    case Half::kBf16:
      static_cast<std::uint16_t*>(x)[i] = detail::float_to_bf16_bits(value);
      return;
    case Half::kFp16:
      static_cast<std::uint16_t*>(x)[i] = detail::float_to_fp16_bits(value);
      return;
    case Half::kNone:
      break;
  }
  static_cast<float*>(x)[i] = value;
}

// IEEE fp32 product and quotient (nvcc's defaults, no fast math): the host's bits.
__global__ void scale_in_dtype_kernel(void* x, Half dtype, std::int64_t n, float operand,
                                      bool divide) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = load_as_float(x, dtype, i);
    store_rounded(x, dtype, i, divide ? __fdiv_rn(v, operand) : __fmul_rn(v, operand));
  }
}

// ops/cpu/gradients.cpp's tests: the exponent bits all ones.
__device__ inline bool non_finite(const void* x, Half dtype, std::int64_t i) {
  switch (dtype) {
    case Half::kBf16:
      return (static_cast<const std::uint16_t*>(x)[i] & 0x7F80u) == 0x7F80u;
    case Half::kFp16:
      return (static_cast<const std::uint16_t*>(x)[i] & 0x7C00u) == 0x7C00u;
    case Half::kNone:
      break;
  }
  return (__float_as_uint(static_cast<const float*>(x)[i]) & 0x7F800000u) == 0x7F800000u;
}

__global__ void flag_inf_or_nan_kernel(int* flag, const void* x, Half dtype, std::int64_t n) {
  bool found = false;
  for (std::int64_t i = first_index(); i < n && !found; i += grid_stride()) {
    found = non_finite(x, dtype, i);
  }
  if (__syncthreads_or(found) && threadIdx.x == 0) *flag = 1;
}

// Block (b, y) computes partial b of segments y, y + gridDim.y, ... of x stored as kS (widened
// exactly: 16-bit weights give the sums of their fp32 widening, bit for bit).
template <detail::Storage kS>
__global__ void segment_partials_kernel(double* partials, const void* x,
                                        const ops::SquaresSegment* segments, std::int64_t count) {
  __shared__ double scratch[kWarps];
  for (std::int64_t k = blockIdx.y; k < count; k += gridDim.y) {
    const ops::SquaresSegment segment = segments[k];
    const double total = detail::partial_squares<kS>(detail::advance<kS>(x, segment.offset),
                                                     segment.numel, blockIdx.x, scratch);
    if (threadIdx.x == 0) partials[k * kSumOfSquaresPartials + blockIdx.x] = total;
  }
}

__global__ void segment_totals_kernel(double* out, const double* partials) {
  __shared__ double scratch[kWarps];
  const double total = detail::sum_partials(partials + blockIdx.x * kSumOfSquaresPartials, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

// The elementwise kernels (accumulate, round_through, scale_in_dtype, flag_inf_or_nan): a
// grid-stride loop over the n elements.
inline detail::LaunchShape elementwise_shape(std::int64_t n) {
  return detail::grid_stride_shape(n);
}

constexpr std::int64_t kMaxGridY = 65535;

// segment_partials_kernel: kSumOfSquaresPartials blocks across, segments striding down a grid.y
// of at most kMaxGridY.
inline detail::LaunchShape segment_partials_shape(std::int64_t count) {
  const std::int64_t rows = count < kMaxGridY ? count : kMaxGridY;
  return {{static_cast<unsigned>(kSumOfSquaresPartials), static_cast<unsigned>(rows)},
          {detail::kThreads}};
}

// segment_totals_kernel: one block per segment, launched for at most kMaxGridY segments at a time
// (totals_chunk of them from `first` on).
inline std::int64_t totals_chunk(std::int64_t count, std::int64_t first) {
  return count - first < kMaxGridY ? count - first : kMaxGridY;
}
inline detail::LaunchShape segment_totals_shape(std::int64_t segments) {
  return {{static_cast<unsigned>(segments)}, {detail::kThreads}};
}

}  // namespace
}  // namespace mds::kernels::gradients_detail
