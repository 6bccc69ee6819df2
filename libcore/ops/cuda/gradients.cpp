#include "kernels/gradients.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void accumulate_rounded(const DeviceContext& ctx, void* accumulator,
                        tensor::DType accumulator_dtype, const float* micro, std::int64_t n,
                        tensor::DType grad_dtype, bool fresh, tensor::DType round_through) {
  kernels::accumulate_rounded(accumulator, accumulator_dtype, micro, n, grad_dtype, stream_of(ctx),
                              fresh, round_through);
}

void round_through(const DeviceContext& ctx, void* x, tensor::DType x_dtype, std::int64_t n,
                   tensor::DType dtype) {
  kernels::round_through(x, x_dtype, n, dtype, stream_of(ctx));
}

void scale_in_dtype(const DeviceContext& ctx, void* x, tensor::DType x_dtype, std::int64_t n,
                    float operand, bool divide) {
  kernels::scale_in_dtype(x, x_dtype, n, operand, divide, stream_of(ctx));
}

bool has_inf_or_nan(const DeviceContext& ctx, const void* x, tensor::DType dtype, std::int64_t n) {
  return kernels::has_inf_or_nan(x, dtype, n, stream_of(ctx), &ctx.cuda().scratch);
}

void sums_of_squares(const DeviceContext& ctx, double* out, const void* x, tensor::DType dtype,
                     const SquaresSegment* segments, std::int64_t count) {
  kernels::sums_of_squares_to_host(out, x, dtype, segments, count, stream_of(ctx),
                                   &ctx.cuda().scratch);
}

}  // namespace mds::ops::cuda
