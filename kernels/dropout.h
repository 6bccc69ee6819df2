// CUDA twins of ops/cpu/dropout.h: the same Philox-4x32-10 streams, so a mask is bit-identical to
// the CPU's for the same (seed, offset, index). Device pointers, work queued on `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/column_sum_scratch.h"
#include "ops/dropout.h"
#include "tensor/dtype.h"

namespace mds::kernels {

// out = (x + bias[i % cols]) ⊙ mask · scale (+ residual); bias and residual may be null.
void dropout_forward(float* out, const float* x, const float* bias, const float* residual,
                     std::int64_t n, std::int64_t cols, const ops::DropoutStream& stream,
                     cudaStream_t cuda_stream);
// dx = dout ⊙ mask · scale when accumulate is false (may run in place), dx += … otherwise.
void dropout_backward(float* dx, const float* dout, std::int64_t n,
                      const ops::DropoutStream& stream, bool accumulate, cudaStream_t cuda_stream);
// dbias[c] += Σ_rows dout ⊙ mask · scale, rows in a fixed order (deterministic).
void dropout_bias_grad(float* dbias, const float* dout, std::int64_t rows, std::int64_t cols,
                       const ops::DropoutStream& stream, ColumnSumScratch& scratch,
                       cudaStream_t cuda_stream);

// The same with activations (out, x, residual, dx, dout) of `dtype` (kFloat32, kBFloat16 or
// kFloat16): loads widened exactly, the fp32 arithmetic above, each output rounded once on
// store. bias and dbias stay fp32.
void dropout_forward(void* out, const void* x, const float* bias, const void* residual,
                     tensor::DType dtype, std::int64_t n, std::int64_t cols,
                     const ops::DropoutStream& stream, cudaStream_t cuda_stream);
void dropout_backward(void* dx, const void* dout, tensor::DType dtype, std::int64_t n,
                      const ops::DropoutStream& stream, bool accumulate, cudaStream_t cuda_stream);
void dropout_bias_grad(float* dbias, const void* dout, tensor::DType dtype, std::int64_t rows,
                       std::int64_t cols, const ops::DropoutStream& stream,
                       ColumnSumScratch& scratch, cudaStream_t cuda_stream);

// bias-dropout-add's backward in one pass (dout read once, each mask drawn once) where cols % 8
// == 0 and dx, dresidual and dout are 16-byte aligned: dbias[c] += Σ_rows dout ⊙ mask · scale
// (a fixed order again, other than dropout_bias_grad's), dresidual += dout (skipped when null),
// then dx as dropout_backward writes it (dx may be dout's memory, dresidual neither). Where it
// does not apply it returns false and does nothing.
bool bias_dropout_add_backward(void* dx, float* dbias, void* dresidual, const void* dout,
                               tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                               const ops::DropoutStream& stream, bool accumulate,
                               ColumnSumScratch& scratch, cudaStream_t cuda_stream);

// dropout_forward with a bias of `bias_dtype`: kFloat32, or the activations' `dtype` (a 16-bit
// model's parameter, widened exactly on load: the results are those of its fp32 widening).
void dropout_forward(void* out, const void* x, const void* bias, const void* residual,
                     tensor::DType dtype, tensor::DType bias_dtype, std::int64_t n,
                     std::int64_t cols, const ops::DropoutStream& stream, cudaStream_t cuda_stream);

}  // namespace mds::kernels
