#include "kernels/dropout.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void dropout_forward(const DeviceContext& ctx, float* out, const float* x, const float* bias,
                     const float* residual, std::int64_t n, std::int64_t cols,
                     const DropoutStream& stream) {
  kernels::dropout_forward(out, x, bias, residual, n, cols, stream, stream_of(ctx));
}

void dropout_backward(const DeviceContext& ctx, float* dx, const float* dout, std::int64_t n,
                      const DropoutStream& stream, bool accumulate) {
  kernels::dropout_backward(dx, dout, n, stream, accumulate, stream_of(ctx));
}

void dropout_bias_grad(const DeviceContext& ctx, float* dbias, const float* dout, std::int64_t rows,
                       std::int64_t cols, const DropoutStream& stream) {
  kernels::dropout_bias_grad(dbias, dout, rows, cols, stream, stream_of(ctx));
}

}  // namespace mds::ops::cuda
