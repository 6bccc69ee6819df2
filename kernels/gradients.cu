#include "kernels/gradients.h"

#include <algorithm>

#include "kernels/adam.h"
#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/sum_of_squares.cuh"

namespace mds::kernels {

namespace {

using detail::grid_for;
using detail::kThreads;
using detail::kWarps;
using tensor::DType;

// The dtypes a kernel below branches on, as a small enum the device code can switch over.
enum class Half : int { kNone, kBf16, kFp16 };

Half half_of(DType dtype) {
  return dtype == DType::kBFloat16  ? Half::kBf16
         : dtype == DType::kFloat16 ? Half::kFp16
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

__global__ void accumulate_fp32_kernel(float* accumulator, const float* micro, std::int64_t n,
                                       Half grad) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    accumulator[i] += round_to(grad, micro[i]);
  }
}

__global__ void accumulate_fp16_kernel(std::uint16_t* accumulator, const float* micro,
                                       std::int64_t n, Half grad) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const float sum = detail::fp16_bits_to_float(accumulator[i]) + round_to(grad, micro[i]);
    accumulator[i] = detail::float_to_fp16_bits(sum);
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

// Block (b, y) computes partial b of segments y, y + gridDim.y, ...
__global__ void segment_partials_kernel(double* partials, const float* x,
                                        const ops::SquaresSegment* segments, std::int64_t count) {
  __shared__ double scratch[kWarps];
  for (std::int64_t k = blockIdx.y; k < count; k += gridDim.y) {
    const ops::SquaresSegment segment = segments[k];
    const double total =
        detail::partial_squares(x + segment.offset, segment.numel, blockIdx.x, scratch);
    if (threadIdx.x == 0) partials[k * kSumOfSquaresPartials + blockIdx.x] = total;
  }
}

__global__ void segment_totals_kernel(double* out, const double* partials) {
  __shared__ double scratch[kWarps];
  const double total = detail::sum_partials(partials + blockIdx.x * kSumOfSquaresPartials, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

void expect_float_or_fp16(const char* what, DType dtype) {
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16) {
    base::fail("cuda: kernels::", what, ": the buffer must be fp32 or fp16, got ",
               tensor::dtype_name(dtype));
  }
}

constexpr std::int64_t kMaxGridY = 65535;

}  // namespace

void accumulate_rounded(void* accumulator, DType accumulator_dtype, const float* micro,
                        std::int64_t n, DType grad_dtype, cudaStream_t stream) {
  expect_float_or_fp16("accumulate_rounded", accumulator_dtype);
  if (n <= 0) return;
  const Half grad = half_of(grad_dtype);
  if (accumulator_dtype == DType::kFloat32) {
    accumulate_fp32_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<float*>(accumulator),
                                                                 micro, n, grad);
  } else {
    accumulate_fp16_kernel<<<grid_for(n), kThreads, 0, stream>>>(
        static_cast<std::uint16_t*>(accumulator), micro, n, grad);
  }
  check_launch("kernels::accumulate_rounded");
}

void round_through(void* x, DType x_dtype, std::int64_t n, DType dtype, cudaStream_t stream) {
  expect_float_or_fp16("round_through", x_dtype);
  if (n <= 0) return;
  if (x_dtype == DType::kFloat32) {
    round_through_fp32_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<float*>(x), n,
                                                                    half_of(dtype));
  } else {
    round_through_fp16_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<std::uint16_t*>(x),
                                                                    n, half_of(dtype));
  }
  check_launch("kernels::round_through");
}

void scale_in_dtype(void* x, DType x_dtype, std::int64_t n, float operand, bool divide,
                    cudaStream_t stream) {
  if (n <= 0) return;
  scale_in_dtype_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, half_of(x_dtype), n, operand,
                                                              divide);
  check_launch("kernels::scale_in_dtype");
}

void flag_inf_or_nan(int* flag, const void* x, DType dtype, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  flag_inf_or_nan_kernel<<<grid_for(n), kThreads, 0, stream>>>(flag, x, half_of(dtype), n);
  check_launch("kernels::flag_inf_or_nan");
}

bool has_inf_or_nan(const void* x, DType dtype, std::int64_t n, cudaStream_t stream) {
  void* workspace = nullptr;
  check_cuda(cudaMallocAsync(&workspace, sizeof(int), stream),
             "kernels::has_inf_or_nan (cudaMallocAsync)");
  int* flag = static_cast<int*>(workspace);
  check_cuda(cudaMemsetAsync(flag, 0, sizeof(int), stream), "kernels::has_inf_or_nan (memset)");
  flag_inf_or_nan(flag, x, dtype, n, stream);
  int host = 0;
  check_cuda(cudaMemcpyAsync(&host, flag, sizeof host, cudaMemcpyDeviceToHost, stream),
             "kernels::has_inf_or_nan (copy flag)");
  check_cuda(cudaFreeAsync(workspace, stream), "kernels::has_inf_or_nan (cudaFreeAsync)");
  check_cuda(cudaStreamSynchronize(stream), "kernels::has_inf_or_nan (synchronize)");
  return host != 0;
}

void sums_of_squares(double* out, double* partials, const float* x,
                     const ops::SquaresSegment* segments, std::int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const dim3 grid(static_cast<unsigned>(kSumOfSquaresPartials),
                  static_cast<unsigned>(std::min(count, kMaxGridY)));
  segment_partials_kernel<<<grid, kThreads, 0, stream>>>(partials, x, segments, count);
  check_launch("kernels::sums_of_squares (partials)");
  for (std::int64_t first = 0; first < count; first += kMaxGridY) {
    const std::int64_t blocks = std::min(count - first, kMaxGridY);
    segment_totals_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        out + first, partials + first * kSumOfSquaresPartials);
    check_launch("kernels::sums_of_squares (totals)");
  }
}

void sums_of_squares_to_host(double* out, const float* x, const ops::SquaresSegment* segments,
                             std::int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const auto entries = static_cast<std::size_t>(count);
  const std::size_t segment_bytes = entries * sizeof(ops::SquaresSegment);
  const std::size_t out_bytes = entries * sizeof(double);
  const std::size_t partial_bytes = out_bytes * kSumOfSquaresPartials;
  void* workspace = nullptr;
  check_cuda(cudaMallocAsync(&workspace, out_bytes + partial_bytes + segment_bytes, stream),
             "kernels::sums_of_squares (cudaMallocAsync)");
  auto* device_out = static_cast<double*>(workspace);
  double* partials = device_out + count;
  auto* device_segments =
      reinterpret_cast<ops::SquaresSegment*>(partials + count * kSumOfSquaresPartials);
  check_cuda(
      cudaMemcpyAsync(device_segments, segments, segment_bytes, cudaMemcpyHostToDevice, stream),
      "kernels::sums_of_squares (copy segments)");
  sums_of_squares(device_out, partials, x, device_segments, count, stream);
  check_cuda(cudaMemcpyAsync(out, device_out, out_bytes, cudaMemcpyDeviceToHost, stream),
             "kernels::sums_of_squares (copy results)");
  check_cuda(cudaFreeAsync(workspace, stream), "kernels::sums_of_squares (cudaFreeAsync)");
  check_cuda(cudaStreamSynchronize(stream), "kernels::sums_of_squares (synchronize)");
}

}  // namespace mds::kernels
