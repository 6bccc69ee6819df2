// CPU reference of ops/layernorm.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

namespace mds::ops::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, std::int64_t rows, std::int64_t cols, float eps);
// dweight and dbias may be null.
void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd,
                        std::int64_t rows, std::int64_t cols);

}  // namespace mds::ops::cpu
