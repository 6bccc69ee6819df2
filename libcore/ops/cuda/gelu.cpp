#include "kernels/gelu.h"
#include "kernels/gemm_gelu.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void gelu_forward(const DeviceContext& ctx, void* out, const void* x, tensor::DType dtype,
                  std::int64_t n, GeluKind kind) {
  kernels::gelu_forward(out, x, dtype, n, kind, stream_of(ctx));
}

void gelu_backward(const DeviceContext& ctx, void* dx, const void* dout, const void* x,
                   tensor::DType dtype, std::int64_t n, GeluKind kind) {
  kernels::gelu_backward(dx, dout, x, dtype, n, kind, stream_of(ctx));
}

void bias_gelu_forward(const DeviceContext& ctx, void* out, const void* x, const void* bias,
                       tensor::DType dtype, tensor::DType bias_dtype, std::int64_t rows,
                       std::int64_t cols, GeluKind kind) {
  kernels::bias_gelu_forward(out, x, bias, dtype, bias_dtype, rows, cols, kind, stream_of(ctx));
}

void bias_gelu_backward(const DeviceContext& ctx, void* dx, float* dbias, const void* dout,
                        const void* x, const void* bias, tensor::DType dtype,
                        tensor::DType bias_dtype, std::int64_t rows, std::int64_t cols,
                        GeluKind kind, bool accumulate) {
  kernels::bias_gelu_backward(dx, dbias, dout, x, bias, dtype, bias_dtype, rows, cols, kind,
                              ctx.cuda().column_sums, stream_of(ctx), accumulate);
}

void linear_bias_gelu_forward(const DeviceContext& ctx, void* out, void* pre_activation,
                              const void* x, const void* weight, const void* bias,
                              tensor::DType dtype, std::int64_t m, std::int64_t n, std::int64_t k) {
  Resources& r = ctx.cuda();
  kernels::linear_bias_gelu_forward(r.gemm, out, pre_activation, x, weight, bias, dtype, m, n, k,
                                    r.stream);
}

}  // namespace mds::ops::cuda
