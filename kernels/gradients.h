// CUDA twins of ops/cpu/gradients.h: the mixed-precision optimizer's gradient passes over flat
// device buffers (rounding accumulation, the communication dtype's round trip, the overflow flag,
// per-parameter sums of squares), work queued on `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/scratch.h"
#include "ops/gradients.h"
#include "tensor/dtype.h"

namespace mds::kernels {

// accumulator[i] = A(accumulator[i] + G(micro[i])): G rounds to `grad_dtype`, A to the
// accumulator's dtype (fp32 or fp16), as ops/cpu/gradients.cpp.
// With `fresh` the accumulator is written as if it held zeros (never read); each result then goes
// through `round_through` and back (fp32: as it is).
void accumulate_rounded(void* accumulator, tensor::DType accumulator_dtype, const float* micro,
                        std::int64_t n, tensor::DType grad_dtype, cudaStream_t stream,
                        bool fresh = false, tensor::DType round_through = tensor::DType::kFloat32);

// x[i] rounded to `dtype` and back to x's dtype (fp32 or fp16), in place.
void round_through(void* x, tensor::DType x_dtype, std::int64_t n, tensor::DType dtype,
                   cudaStream_t stream);

// x[i] · operand, or x[i] / operand when `divide`, in fp32 and rounded back to x's dtype (fp32,
// bf16 or fp16), in place, as ops/cpu/gradients.cpp.
void scale_in_dtype(void* x, tensor::DType x_dtype, std::int64_t n, float operand, bool divide,
                    cudaStream_t stream);

// Sets *flag (one device int the caller zeroed) to 1 when an element of x (fp32, bf16 or fp16) is
// inf or NaN; leaves it otherwise. Every writer stores the same value: no atomics needed.
void flag_inf_or_nan(int* flag, const void* x, tensor::DType dtype, std::int64_t n,
                     cudaStream_t stream);
// The same, returned to the host: the flag in `scratch` (or a stream-ordered allocation when
// null) and one wait.
bool has_inf_or_nan(const void* x, tensor::DType dtype, std::int64_t n, cudaStream_t stream,
                    Scratch* scratch = nullptr);

// out[k] = Σ x² over segments[k] in double, each segment summed exactly as
// kernels::sum_of_squares sums a buffer of its length (the same 512-block split and block sums),
// so every value is bit-identical to that call's. segments and out: `count` device entries;
// partials: count · kSumOfSquaresPartials device doubles of workspace.
void sums_of_squares(double* out, double* partials, const float* x,
                     const ops::SquaresSegment* segments, std::int64_t count, cudaStream_t stream);
// The same from host segments into host `out`: one copy in, the kernels, one copy back, one wait;
// the device side in `scratch` (or a stream-ordered allocation when null).
void sums_of_squares_to_host(double* out, const float* x, const ops::SquaresSegment* segments,
                             std::int64_t count, cudaStream_t stream, Scratch* scratch = nullptr);
// Both with x of `dtype` (kFloat32, kBFloat16 or kFloat16): each element widened exactly, so the
// sums of 16-bit weights are bit-identical to those of their fp32 widening (the same squares in
// double, added in the same order).
void sums_of_squares(double* out, double* partials, const void* x, tensor::DType dtype,
                     const ops::SquaresSegment* segments, std::int64_t count, cudaStream_t stream);
void sums_of_squares_to_host(double* out, const void* x, tensor::DType dtype,
                             const ops::SquaresSegment* segments, std::int64_t count,
                             cudaStream_t stream, Scratch* scratch = nullptr);

}  // namespace mds::kernels
