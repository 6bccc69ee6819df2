// CPU reference of ops/gradients.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

#include "ops/gradients.h"
#include "tensor/dtype.h"

namespace mds::ops::cpu {

// accumulator: fp32 or fp16 (accumulator_dtype); micro: fp32.
// ops::accumulate_rounded with its AccumulateSteps (`fresh`, `round_through`).
void accumulate_rounded(void* accumulator, tensor::DType accumulator_dtype, const float* micro,
                        std::int64_t n, tensor::DType grad_dtype, bool fresh = false,
                        tensor::DType round_through = tensor::DType::kFloat32);
// x: fp32 or fp16 (x_dtype).
void round_through(void* x, tensor::DType x_dtype, std::int64_t n, tensor::DType dtype);
// x: fp32, bf16 or fp16 (x_dtype); x[i] · operand, or x[i] / operand when `divide`.
void scale_in_dtype(void* x, tensor::DType x_dtype, std::int64_t n, float operand, bool divide);
bool has_inf_or_nan(const void* x, tensor::DType dtype, std::int64_t n);
// out[k] = sum_of_squares of elements [offset, offset + numel) of segments[k] in x (fp32, bf16 or
// fp16: dtype), each element widened exactly.
void sums_of_squares(double* out, const void* x, tensor::DType dtype,
                     const SquaresSegment* segments, std::int64_t count);

}  // namespace mds::ops::cpu
