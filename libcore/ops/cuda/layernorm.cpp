#include "kernels/layernorm.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void layernorm_forward(const DeviceContext& ctx, void* out, float* mean, float* rstd, const void* x,
                       const void* weight, const void* bias, tensor::DType dtype,
                       tensor::DType param_dtype, std::int64_t rows, std::int64_t cols, float eps) {
  kernels::layernorm_forward(out, mean, rstd, x, weight, bias, dtype, param_dtype, rows, cols, eps,
                             stream_of(ctx));
}

void layernorm_backward(const DeviceContext& ctx, void* dx, float* dweight, float* dbias,
                        const void* dout, const void* x, const void* weight, const float* mean,
                        const float* rstd, tensor::DType dtype, tensor::DType param_dtype,
                        std::int64_t rows, std::int64_t cols) {
  kernels::layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, dtype, param_dtype,
                              rows, cols, ctx.cuda().column_sums, stream_of(ctx));
}

}  // namespace mds::ops::cuda
