#include "kernels/dropout.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void dropout_forward(const DeviceContext& ctx, void* out, const void* x, const void* bias,
                     const void* residual, tensor::DType dtype, tensor::DType bias_dtype,
                     std::int64_t n, std::int64_t cols, const DropoutStream& stream) {
  kernels::dropout_forward(out, x, bias, residual, dtype, bias_dtype, n, cols, stream,
                           stream_of(ctx));
}

void dropout_backward(const DeviceContext& ctx, void* dx, const void* dout, tensor::DType dtype,
                      std::int64_t n, const DropoutStream& stream, bool accumulate) {
  kernels::dropout_backward(dx, dout, dtype, n, stream, accumulate, stream_of(ctx));
}

void dropout_bias_grad(const DeviceContext& ctx, float* dbias, const void* dout,
                       tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                       const DropoutStream& stream) {
  kernels::dropout_bias_grad(dbias, dout, dtype, rows, cols, stream, ctx.cuda().column_sums,
                             stream_of(ctx));
}

bool bias_dropout_add_backward(const DeviceContext& ctx, void* dx, float* dbias, void* dresidual,
                               const void* dout, tensor::DType dtype, std::int64_t rows,
                               std::int64_t cols, const DropoutStream& stream, bool accumulate) {
  return kernels::bias_dropout_add_backward(dx, dbias, dresidual, dout, dtype, rows, cols, stream,
                                            accumulate, ctx.cuda().column_sums, stream_of(ctx));
}

}  // namespace mds::ops::cuda
