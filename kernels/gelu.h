// CUDA twins of ops/cpu/gelu.h (same expressions, same order of operations; tanhf/erff/expf for
// the transcendentals): device pointers, work queued on `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/gelu.h"

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
// dbias may be null. dx must not alias dout.
void bias_gelu_backward(float* dx, float* dbias, const float* dout, const float* x,
                        const float* bias, std::int64_t rows, std::int64_t cols, ops::GeluKind kind,
                        cudaStream_t stream);

}  // namespace mds::kernels
