// CPU reference of ops/adam.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

#include "ops/adam.h"
#include "tensor/dtype.h"

namespace mds::ops::cpu {

void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const AdamWConfig& config, float bias_correction1,
                float bias_correction2);
// adamw_step, then low[i] = params[i] rounded to low_dtype (bf16 or fp16), in the same loop.
void adamw_step_and_cast(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::int64_t n, const AdamWConfig& config, float bias_correction1,
                         float bias_correction2, void* low, tensor::DType low_dtype);
double sum_of_squares(const float* x, std::int64_t n);
// The same over x of `dtype` (fp32, bf16 or fp16), each element widened exactly: 16-bit values give
// the bits of their fp32 widening (the same squares in double, added in the same order).
double sum_of_squares(const void* x, tensor::DType dtype, std::int64_t n);

}  // namespace mds::ops::cpu
