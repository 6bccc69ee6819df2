// CPU reference of ops/adam.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

#include "ops/adam.h"

namespace mds::ops::cpu {

void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const AdamWConfig& config, float bias_correction1,
                float bias_correction2);
double sum_of_squares(const float* x, std::int64_t n);

}  // namespace mds::ops::cpu
