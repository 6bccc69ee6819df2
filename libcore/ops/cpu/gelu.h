// CPU reference of ops/gelu.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

#include "ops/gelu.h"

namespace mds::ops::cpu {

float gelu(float z, GeluKind kind);
float gelu_derivative(float z, GeluKind kind);

void gelu_forward(float* out, const float* x, std::int64_t n, GeluKind kind);
void gelu_backward(float* dx, const float* dout, const float* x, std::int64_t n, GeluKind kind);
void bias_gelu_forward(float* out, const float* x, const float* bias, std::int64_t rows,
                       std::int64_t cols, GeluKind kind);
// dbias may be null, and bias too (x then holds the GeLU's input whole).
void bias_gelu_backward(float* dx, float* dbias, const float* dout, const float* x,
                        const float* bias, std::int64_t rows, std::int64_t cols, GeluKind kind);

}  // namespace mds::ops::cpu
