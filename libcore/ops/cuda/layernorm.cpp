#include "kernels/layernorm.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void layernorm_forward(const DeviceContext& ctx, float* out, float* mean, float* rstd,
                       const float* x, const float* weight, const float* bias, std::int64_t rows,
                       std::int64_t cols, float eps) {
  kernels::layernorm_forward(out, mean, rstd, x, weight, bias, rows, cols, eps, stream_of(ctx));
}

void layernorm_backward(const DeviceContext& ctx, float* dx, float* dweight, float* dbias,
                        const float* dout, const float* x, const float* weight, const float* mean,
                        const float* rstd, std::int64_t rows, std::int64_t cols) {
  kernels::layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, rows, cols,
                              stream_of(ctx));
}

}  // namespace mds::ops::cuda
