#include "kernels/gelu.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void gelu_forward(const DeviceContext& ctx, float* out, const float* x, std::int64_t n,
                  GeluKind kind) {
  kernels::gelu_forward(out, x, n, kind, stream_of(ctx));
}

void gelu_backward(const DeviceContext& ctx, float* dx, const float* dout, const float* x,
                   std::int64_t n, GeluKind kind) {
  kernels::gelu_backward(dx, dout, x, n, kind, stream_of(ctx));
}

void bias_gelu_forward(const DeviceContext& ctx, float* out, const float* x, const float* bias,
                       std::int64_t rows, std::int64_t cols, GeluKind kind) {
  kernels::bias_gelu_forward(out, x, bias, rows, cols, kind, stream_of(ctx));
}

void bias_gelu_backward(const DeviceContext& ctx, float* dx, float* dbias, const float* dout,
                        const float* x, const float* bias, std::int64_t rows, std::int64_t cols,
                        GeluKind kind) {
  kernels::bias_gelu_backward(dx, dbias, dout, x, bias, rows, cols, kind, stream_of(ctx));
}

}  // namespace mds::ops::cuda
