// CUDA twins of ops/cpu/gelu.h (same expressions, same order of operations; tanhf/erff/expf for
// the transcendentals): device pointers, work queued on `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/column_sum_scratch.h"
#include "ops/gelu.h"
#include "tensor/dtype.h"

namespace mds::kernels {

// out = gelu(x).
void gelu_forward(float* out, const float* x, std::int64_t n, ops::GeluKind kind,
                  cudaStream_t stream);
// dx += gelu'(x)·dout.
void gelu_backward(float* dx, const float* dout, const float* x, std::int64_t n, ops::GeluKind kind,
                   cudaStream_t stream);
// out[r, c] = gelu(x[r, c] + bias[c]).
void bias_gelu_forward(float* out, const float* x, const float* bias, std::int64_t rows,
                       std::int64_t cols, ops::GeluKind kind, cudaStream_t stream);
// g = gelu'(x + bias)·dout; dx += g; dbias[c] += Σ_rows g (rows in a fixed order, deterministic).
// dbias may be null; so may bias, when x already holds the GeLU's input (a GEMM epilogue added
// the bias). dx must not alias dout.
void bias_gelu_backward(float* dx, float* dbias, const float* dout, const float* x,
                        const float* bias, std::int64_t rows, std::int64_t cols, ops::GeluKind kind,
                        ColumnSumScratch& scratch, cudaStream_t stream);

// The same with activations (out, x, dx, dout) of `dtype` (kFloat32, kBFloat16 or kFloat16):
// loads widened exactly, the fp32 expressions above, each output rounded once on store. bias and
// dbias stay fp32.
void gelu_forward(void* out, const void* x, tensor::DType dtype, std::int64_t n, ops::GeluKind kind,
                  cudaStream_t stream);
void gelu_backward(void* dx, const void* dout, const void* x, tensor::DType dtype, std::int64_t n,
                   ops::GeluKind kind, cudaStream_t stream);
void bias_gelu_forward(void* out, const void* x, const float* bias, tensor::DType dtype,
                       std::int64_t rows, std::int64_t cols, ops::GeluKind kind,
                       cudaStream_t stream);
void bias_gelu_backward(void* dx, float* dbias, const void* dout, const void* x, const float* bias,
                        tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                        ops::GeluKind kind, ColumnSumScratch& scratch, cudaStream_t stream);

// The same with a bias of `bias_dtype`: kFloat32, or the activations' `dtype` (a 16-bit model's
// parameter, widened exactly on load: the results are those of its fp32 widening, bit for bit).
// dbias stays fp32.
void bias_gelu_forward(void* out, const void* x, const void* bias, tensor::DType dtype,
                       tensor::DType bias_dtype, std::int64_t rows, std::int64_t cols,
                       ops::GeluKind kind, cudaStream_t stream);
// With accumulate false, dx = g (dx not read) instead of dx += g.
void bias_gelu_backward(void* dx, float* dbias, const void* dout, const void* x, const void* bias,
                        tensor::DType dtype, tensor::DType bias_dtype, std::int64_t rows,
                        std::int64_t cols, ops::GeluKind kind, ColumnSumScratch& scratch,
                        cudaStream_t stream, bool accumulate = true);

}  // namespace mds::kernels
