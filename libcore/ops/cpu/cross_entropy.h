// CPU reference of ops/cross_entropy.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace mds::ops::cpu {

void cross_entropy_row_max(float* max, const float* logits, std::int64_t n, std::int64_t v);
void cross_entropy_target_logit(float* target_logit, const float* logits,
                                const std::int64_t* targets, const float* max, std::int64_t n,
                                std::int64_t v, std::int64_t vocab_start);
void cross_entropy_exp_sum(float* sum_exp, float* logits, const float* max, std::int64_t n,
                           std::int64_t v);
void cross_entropy_loss(float* loss, const float* sum_exp, const float* target_logit,
                        std::int64_t n);
void cross_entropy_backward(float* dlogits, const float* exp_logits, const std::int64_t* targets,
                            const float* sum_exp, const float* dloss, std::int64_t n,
                            std::int64_t v, std::int64_t vocab_start);
float masked_mean_loss(const float* loss, const float* mask, std::int64_t n);
// Σ mask in token order in double: the divisor of both passes.
double loss_mask_sum(const float* mask, std::int64_t n);
// dloss = mask · (grad / mask_sum) in fp32.
void masked_mean_loss_backward(float* dloss, const float* mask, std::int64_t n, float grad,
                               double mask_sum);

// The same steps on 16-bit logits (`dtype` bfloat16 or float16). Each row is widened exactly into
// a per-thread fp32 row and the fp32 functions above run on it, so max, target logit, sum_exp and
// the gradient before its rounding are bit for bit what they give on the widened logits, without
// an [n, v] fp32 copy. The logits are left as they are: the exps are recomputed in the backward
// (16-bit exps would be rounded), which is why it takes max.
void cross_entropy_row_max(float* max, const void* logits, tensor::DType dtype, std::int64_t n,
                           std::int64_t v);
void cross_entropy_target_logit(float* target_logit, const void* logits, tensor::DType dtype,
                                const std::int64_t* targets, const float* max, std::int64_t n,
                                std::int64_t v, std::int64_t vocab_start);
void cross_entropy_exp_sum(float* sum_exp, const void* logits, tensor::DType dtype,
                           const float* max, std::int64_t n, std::int64_t v);
// dlogits (16-bit, may be logits itself) = the fp32 gradient of the widened logits, rounded once.
void cross_entropy_backward(void* dlogits, const void* logits, tensor::DType dtype,
                            const std::int64_t* targets, const float* max, const float* sum_exp,
                            const float* dloss, std::int64_t n, std::int64_t v,
                            std::int64_t vocab_start);

}  // namespace mds::ops::cpu
