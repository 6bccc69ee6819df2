// CUDA twins of ops/cpu/layernorm.h: device pointers, work queued on `stream`. One warp per row
// where rows allow (LayerNormKernel), one block per row elsewhere; row statistics in fp32 with two
// passes over the row (the CPU reference uses double).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/column_sum_scratch.h"
#include "tensor/dtype.h"

namespace mds::kernels {

// kAuto: the forward, residual forward and backward dx take one warp per row (chunks of eight in
// registers, 16-byte accesses) where rows are a multiple of 8 elements, at most 2048, and every
// array is 16-byte aligned; one block per row elsewhere. Where the warp kernels take rows of at
// most 1024, the backward sums dweight and dbias in the same pass as dx (then a small kernel adds
// the blocks' sums up); elsewhere a column-sum kernel reads dout and x again for them.
// kSeparateParams keeps that second read for every row (the backward before session 16), kBlock
// forces the block kernels (tests, benchmarks). Same arithmetic per element, other summation
// orders.
enum class LayerNormKernel { kAuto, kBlock, kSeparateParams };

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
                        std::int64_t rows, std::int64_t cols, ColumnSumScratch& scratch,
                        cudaStream_t stream);

// The same with activations (out, x, residual, sum_out, dx, dout) of `dtype` (kFloat32, kBFloat16
// or kFloat16): loads widened exactly, the fp32 statistics and arithmetic above, each output
// rounded once on store. weight, bias, mean, rstd, dweight and dbias stay fp32. The residual
// variant normalizes the rounded sum it wrote.
void layernorm_forward(void* out, float* mean, float* rstd, const void* x, const float* weight,
                       const float* bias, tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                       float eps, cudaStream_t stream);
void residual_layernorm_forward(void* sum_out, void* out, float* mean, float* rstd, const void* x,
                                const void* residual, const float* weight, const float* bias,
                                tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                                float eps, cudaStream_t stream);
void layernorm_backward(void* dx, float* dweight, float* dbias, const void* dout, const void* x,
                        const float* weight, const float* mean, const float* rstd,
                        tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                        ColumnSumScratch& scratch, cudaStream_t stream);

// The same with weight and bias of `param_dtype`: kFloat32, or the activations' `dtype` (a 16-bit
// model's parameters, widened exactly on load: the results are those of their fp32 widening, bit
// for bit). Statistics and parameter gradients stay fp32.
void layernorm_forward(void* out, float* mean, float* rstd, const void* x, const void* weight,
                       const void* bias, tensor::DType dtype, tensor::DType param_dtype,
                       std::int64_t rows, std::int64_t cols, float eps, cudaStream_t stream,
                       LayerNormKernel kernel_family = LayerNormKernel::kAuto);
void residual_layernorm_forward(void* sum_out, void* out, float* mean, float* rstd, const void* x,
                                const void* residual, const void* weight, const void* bias,
                                tensor::DType dtype, tensor::DType param_dtype, std::int64_t rows,
                                std::int64_t cols, float eps, cudaStream_t stream,
                                LayerNormKernel kernel_family = LayerNormKernel::kAuto);
void layernorm_backward(void* dx, float* dweight, float* dbias, const void* dout, const void* x,
                        const void* weight, const float* mean, const float* rstd,
                        tensor::DType dtype, tensor::DType param_dtype, std::int64_t rows,
                        std::int64_t cols, ColumnSumScratch& scratch, cudaStream_t stream,
                        LayerNormKernel kernel_family = LayerNormKernel::kAuto);

}  // namespace mds::kernels
