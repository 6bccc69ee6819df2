// CPU reference of ops/matmul.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

namespace mds::ops::cpu {

// out[M, N] = x[M, K] · weight[N, K]ᵀ (+ bias[N] when not null).
void linear_forward(float* out, const float* x, const float* weight, const float* bias,
                    std::int64_t m, std::int64_t n, std::int64_t k);
// Null gradient pointers are skipped; all given ones accumulate, except dweight, which is
// written over without `accumulate_dweight` (as adding onto zeros, without reading it).
void linear_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                     const float* weight, std::int64_t m, std::int64_t n, std::int64_t k,
                     bool accumulate_dweight = true);
void batched_matmul(float* out, const float* a, const float* b, std::int64_t batch, std::int64_t m,
                    std::int64_t n, std::int64_t k, bool transpose_a, bool transpose_b, float alpha,
                    float beta);

}  // namespace mds::ops::cpu
