#include "kernels/gradients.h"

#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/gradients_kernels.cuh"
#include "kernels/launch.cuh"

namespace mds::kernels {

namespace {

using detail::launch;
using namespace gradients_detail;
using tensor::DType;

void expect_float_or_fp16(const char* what, DType dtype) {
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16) {
    base::fail("cuda: kernels::", what, ": the buffer must be fp32 or fp16, got ",
               tensor::dtype_name(dtype));
  }
}

}  // namespace

void accumulate_rounded(void* accumulator, DType accumulator_dtype, const float* micro,
                        std::int64_t n, DType grad_dtype, cudaStream_t stream, bool fresh,
                        DType round_through) {
  expect_float_or_fp16("accumulate_rounded", accumulator_dtype);
  if (n <= 0) return;
  const AccumulateHow how{half_of(grad_dtype), fresh, half_of(round_through)};
  if (accumulator_dtype == DType::kFloat32) {
    launch("kernels::accumulate_rounded", accumulate_fp32_kernel, elementwise_shape(n), stream,
           static_cast<float*>(accumulator), micro, n, how);
  } else {
    launch("kernels::accumulate_rounded", accumulate_fp16_kernel, elementwise_shape(n), stream,
           static_cast<std::uint16_t*>(accumulator), micro, n, how);
  }
}

void round_through(void* x, DType x_dtype, std::int64_t n, DType dtype, cudaStream_t stream) {
  expect_float_or_fp16("round_through", x_dtype);
  if (n <= 0) return;
  if (x_dtype == DType::kFloat32) {
    launch("kernels::round_through", round_through_fp32_kernel, elementwise_shape(n), stream,
           static_cast<float*>(x), n, half_of(dtype));
  } else {
    launch("kernels::round_through", round_through_fp16_kernel, elementwise_shape(n), stream,
           static_cast<std::uint16_t*>(x), n, half_of(dtype));
  }
}

void scale_in_dtype(void* x, DType x_dtype, std::int64_t n, float operand, bool divide,
                    cudaStream_t stream) {
  if (n <= 0) return;
  launch("kernels::scale_in_dtype", scale_in_dtype_kernel, elementwise_shape(n), stream, x,
         half_of(x_dtype), n, operand, divide);
}

void flag_inf_or_nan(int* flag, const void* x, DType dtype, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch("kernels::flag_inf_or_nan", flag_inf_or_nan_kernel, elementwise_shape(n), stream, flag, x,
         half_of(dtype), n);
}

bool has_inf_or_nan(const void* x, DType dtype, std::int64_t n, cudaStream_t stream,
                    Scratch* scratch) {
  const CallScratch workspace(scratch, sizeof(int), stream);
  int* flag = static_cast<int*>(workspace.data());
  check_cuda(cudaMemsetAsync(flag, 0, sizeof(int), stream), "kernels::has_inf_or_nan (memset)");
  flag_inf_or_nan(flag, x, dtype, n, stream);
  int host = 0;
  check_cuda(cudaMemcpyAsync(&host, flag, sizeof host, cudaMemcpyDeviceToHost, stream),
             "kernels::has_inf_or_nan (copy flag)");
  check_cuda(cudaStreamSynchronize(stream), "kernels::has_inf_or_nan (synchronize)");
  return host != 0;
}

void sums_of_squares(double* out, double* partials, const void* x, DType dtype,
                     const ops::SquaresSegment* segments, std::int64_t count, cudaStream_t stream) {
  detail::with_storage(dtype, "sums_of_squares", [&](auto s) {
    if (count <= 0) return;
    launch("kernels::sums_of_squares (partials)", segment_partials_kernel<decltype(s)::value>,
           segment_partials_shape(count), stream, partials, x, segments, count);
    for (std::int64_t first = 0; first < count; first += kMaxGridY) {
      launch("kernels::sums_of_squares (totals)", segment_totals_kernel,
             segment_totals_shape(totals_chunk(count, first)), stream, out + first,
             partials + first * kSumOfSquaresPartials);
    }
  });
}

void sums_of_squares_to_host(double* out, const void* x, DType dtype,
                             const ops::SquaresSegment* segments, std::int64_t count,
                             cudaStream_t stream, Scratch* scratch) {
  detail::storage_of(dtype, "sums_of_squares");  // refuses other dtypes before any work
  if (count <= 0) return;
  const auto entries = static_cast<std::size_t>(count);
  const std::size_t segment_bytes = entries * sizeof(ops::SquaresSegment);
  const std::size_t out_bytes = entries * sizeof(double);
  const std::size_t partial_bytes = out_bytes * kSumOfSquaresPartials;
  const CallScratch workspace(scratch, out_bytes + partial_bytes + segment_bytes, stream);
  auto* device_out = static_cast<double*>(workspace.data());
  double* partials = device_out + count;
  auto* device_segments =
      reinterpret_cast<ops::SquaresSegment*>(partials + count * kSumOfSquaresPartials);
  check_cuda(
      cudaMemcpyAsync(device_segments, segments, segment_bytes, cudaMemcpyHostToDevice, stream),
      "kernels::sums_of_squares (copy segments)");
  sums_of_squares(device_out, partials, x, dtype, device_segments, count, stream);
  check_cuda(cudaMemcpyAsync(out, device_out, out_bytes, cudaMemcpyDeviceToHost, stream),
             "kernels::sums_of_squares (copy results)");
  check_cuda(cudaStreamSynchronize(stream), "kernels::sums_of_squares (synchronize)");
}

void sums_of_squares(double* out, double* partials, const float* x,
                     const ops::SquaresSegment* segments, std::int64_t count, cudaStream_t stream) {
  sums_of_squares(out, partials, x, DType::kFloat32, segments, count, stream);
}

void sums_of_squares_to_host(double* out, const float* x, const ops::SquaresSegment* segments,
                             std::int64_t count, cudaStream_t stream, Scratch* scratch) {
  sums_of_squares_to_host(out, x, DType::kFloat32, segments, count, stream, scratch);
}

}  // namespace mds::kernels
