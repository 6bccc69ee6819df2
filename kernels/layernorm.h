// CUDA twins of ops/cpu/layernorm.h: device pointers, work queued on `stream`. One block per row;
// row statistics in fp32 with two passes over the row (the CPU reference uses double).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mds::kernels {

// out = (x − mean)·rstd·weight + bias per row of [rows, cols]; mean and rstd [rows] are written.
void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, std::int64_t rows, std::int64_t cols, float eps,
                       cudaStream_t stream);
// The residual add before a LayerNorm in one pass: sum_out = x + residual (bit-identical to
// ops::cpu::add), then layernorm_forward of sum_out. sum_out may alias x or residual (the residual
// stream updated in place).
void residual_layernorm_forward(float* sum_out, float* out, float* mean, float* rstd,
                                const float* x, const float* residual, const float* weight,
                                const float* bias, std::int64_t rows, std::int64_t cols, float eps,
                                cudaStream_t stream);
// dx += rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dout·weight, x̂ = (x − mean)·rstd;
// dweight += Σ_rows dout·x̂, dbias += Σ_rows dout (deterministic). dweight and dbias may be null.
void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd,
                        std::int64_t rows, std::int64_t cols, cudaStream_t stream);

}  // namespace mds::kernels
