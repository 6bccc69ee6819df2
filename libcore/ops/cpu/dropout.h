// CPU reference of ops/dropout.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

#include "ops/dropout.h"

namespace mds::ops::cpu {

// out = (x + bias[i % cols]) ⊙ mask · scale (+ residual); bias and residual may be null.
void dropout_forward(float* out, const float* x, const float* bias, const float* residual,
                     std::int64_t n, std::int64_t cols, const DropoutStream& stream);
// dx = dout ⊙ mask · scale when accumulate is false, dx += … otherwise.
void dropout_backward(float* dx, const float* dout, std::int64_t n, const DropoutStream& stream,
                      bool accumulate);
// factors[k] = attention_dropout_keep(first + k) · scale for k < count: the attention dropout's
// factors of elements first … first + count − 1, which the attention fuses into its own loops.
void attention_dropout_factors(float* factors, const DropoutStream& stream, std::uint64_t first,
                               std::int64_t count);
// dbias[c] += Σ_rows dout ⊙ mask · scale.
void dropout_bias_grad(float* dbias, const float* dout, std::int64_t rows, std::int64_t cols,
                       const DropoutStream& stream);

}  // namespace mds::ops::cpu
