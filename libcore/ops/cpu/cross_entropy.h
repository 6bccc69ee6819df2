// CPU reference of ops/cross_entropy.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

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
void masked_mean_loss_backward(float* dloss, const float* mask, std::int64_t n, float grad);

}  // namespace mds::ops::cpu
