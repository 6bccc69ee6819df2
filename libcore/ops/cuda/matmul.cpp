#include "kernels/gemm.h"
#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void linear_forward(const DeviceContext& ctx, void* out, const void* x, const void* weight,
                    const void* bias, tensor::DType dtype, std::int64_t m, std::int64_t n,
                    std::int64_t k) {
  Resources& r = ctx.cuda();
  kernels::linear_forward(r.gemm, out, x, weight, bias, dtype, m, n, k, r.stream);
}

void linear_backward(const DeviceContext& ctx, void* dx, float* dweight, float* dbias,
                     const void* dout, const void* x, const void* weight, tensor::DType dtype,
                     std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate_dx,
                     bool accumulate_dweight) {
  Resources& r = ctx.cuda();
  kernels::linear_backward(r.gemm, dx, dweight, dbias, dout, x, weight, dtype, m, n, k,
                           r.column_sums, r.stream, accumulate_dx, accumulate_dweight);
}

void batched_matmul(const DeviceContext& ctx, void* out, const void* a, const void* b,
                    tensor::DType dtype, std::int64_t batch, std::int64_t m, std::int64_t n,
                    std::int64_t k, bool transpose_a, bool transpose_b, float alpha, float beta) {
  Resources& r = ctx.cuda();
  kernels::batched_matmul(r.gemm, out, a, b, dtype, batch, m, n, k, transpose_a, transpose_b, alpha,
                          beta, r.stream);
}

}  // namespace mds::ops::cuda
