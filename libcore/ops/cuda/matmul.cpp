#include "kernels/gemm.h"
#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void linear_forward(const DeviceContext& ctx, float* out, const float* x, const float* weight,
                    const float* bias, std::int64_t m, std::int64_t n, std::int64_t k) {
  Resources& r = ctx.cuda();
  kernels::linear_forward(r.gemm, out, x, weight, bias, m, n, k, r.stream);
}

void linear_backward(const DeviceContext& ctx, float* dx, float* dweight, float* dbias,
                     const float* dout, const float* x, const float* weight, std::int64_t m,
                     std::int64_t n, std::int64_t k) {
  Resources& r = ctx.cuda();
  kernels::linear_backward(r.gemm, dx, dweight, dbias, dout, x, weight, m, n, k, r.stream);
}

void batched_matmul(const DeviceContext& ctx, float* out, const float* a, const float* b,
                    std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                    bool transpose_a, bool transpose_b, float alpha, float beta) {
  Resources& r = ctx.cuda();
  kernels::batched_matmul(r.gemm, out, a, b, batch, m, n, k, transpose_a, transpose_b, alpha, beta,
                          r.stream);
}

}  // namespace mds::ops::cuda
