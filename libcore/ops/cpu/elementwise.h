// CPU reference of ops/elementwise.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace mds::ops::cpu {

void add(float* out, const float* a, const float* b, std::int64_t n);
void scale(float* out, const float* x, float factor, std::int64_t n);
void fill(void* out, tensor::DType dtype, float value, std::int64_t n);
// Between kFloat32, kBFloat16 and kFloat16 in any combination.
void cast(void* out, tensor::DType out_dtype, const void* x, tensor::DType x_dtype, std::int64_t n);

}  // namespace mds::ops::cpu
