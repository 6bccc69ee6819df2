#include "kernels/check.h"
#include "kernels/cross_entropy.h"
#include "kernels/cross_entropy_kernels.cuh"
#include "kernels/device_common.cuh"
#include "kernels/launch.cuh"

namespace mds::kernels {

namespace {

using detail::launch;
using namespace cross_entropy_detail;

}  // namespace

void cross_entropy_row_max(float* max, const float* logits, std::int64_t n, std::int64_t v,
                           cudaStream_t stream) {
  if (n <= 0) return;
  launch("kernels::cross_entropy_row_max", row_max_kernel, row_shape(n), stream, max, logits, v);
}

void cross_entropy_target_logit(float* target_logit, const float* logits,
                                const std::int64_t* targets, const float* max, std::int64_t n,
                                std::int64_t v, std::int64_t vocab_start, cudaStream_t stream) {
  if (n <= 0) return;
  launch("kernels::cross_entropy_target_logit", target_logit_kernel, target_logit_shape(n), stream,
         target_logit, logits, targets, max, n, v, vocab_start);
}

void cross_entropy_exp_sum(float* sum_exp, float* logits, const float* max, std::int64_t n,
                           std::int64_t v, cudaStream_t stream) {
  if (n <= 0) return;
  launch("kernels::cross_entropy_exp_sum", exp_sum_kernel, row_shape(n), stream, sum_exp, logits,
         max, v);
}

void cross_entropy_loss(float* loss, const float* sum_exp, const float* target_logit,
                        std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch("kernels::cross_entropy_loss", loss_kernel, loss_shape(n), stream, loss, sum_exp,
         target_logit, n);
}

void cross_entropy_forward(float* loss, float* max, float* sum_exp, float* logits,
                           const std::int64_t* targets, std::int64_t n, std::int64_t v,
                           cudaStream_t stream) {
  if (n <= 0) return;
  launch("kernels::cross_entropy_forward", forward_kernel, row_shape(n), stream, loss, max, sum_exp,
         logits, targets, v);
}

void cross_entropy_backward(float* dlogits, const float* exp_logits, const std::int64_t* targets,
                            const float* sum_exp, const float* dloss, std::int64_t n,
                            std::int64_t v, std::int64_t vocab_start, cudaStream_t stream) {
  if (n <= 0) return;
  launch("kernels::cross_entropy_backward", backward_kernel, row_shape(n), stream, dlogits,
         exp_logits, targets, sum_exp, dloss, v, vocab_start);
}

}  // namespace mds::kernels
