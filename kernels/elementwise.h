// CUDA twins of ops/cpu/elementwise.h: device pointers, work queued on `stream` (no sync).
// Outputs may alias inputs.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "kernels/scratch.h"
#include "ops/elementwise.h"
#include "tensor/dtype.h"

namespace mds::kernels {

void add(float* out, const float* a, const float* b, std::int64_t n, cudaStream_t stream);
void scale(float* out, const float* x, float factor, std::int64_t n, cudaStream_t stream);
// The same on activations of `dtype` (kFloat32, kBFloat16 or kFloat16, every pointer): inputs
// widened exactly, the fp32 sum or product rounded once to dtype (bit-identical to the CPU).
void add(void* out, const void* a, const void* b, tensor::DType dtype, std::int64_t n,
         cudaStream_t stream);
void scale(void* out, const void* x, float factor, tensor::DType dtype, std::int64_t n,
           cudaStream_t stream);
// dtype: kFloat32, kBFloat16 or kFloat16; value rounded to it as the CPU rounds.
void fill(void* out, tensor::DType dtype, float value, std::int64_t n, cudaStream_t stream);
// Between kFloat32, kBFloat16 and kFloat16 in any combination; equal dtypes copy (and may alias).
// Finite values and infinities convert bit-identically to the CPU; a NaN stays a NaN.
void cast(void* out, tensor::DType out_dtype, const void* x, tensor::DType x_dtype, std::int64_t n,
          cudaStream_t stream);
// ops::cast_pieces: every piece cast as `cast` casts (times `factor` unless it is 1, the fp32
// product rounded once), in one launch (the pieces go to the device through `scratch`, or a
// stream-ordered allocation when null; no wait).
void cast_pieces(void* out, tensor::DType out_dtype, const void* x, tensor::DType x_dtype,
                 std::span<const ops::CastPiece> pieces, float factor, cudaStream_t stream,
                 Scratch* scratch = nullptr);

}  // namespace mds::kernels
