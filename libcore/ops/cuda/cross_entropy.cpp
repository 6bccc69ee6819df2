#include "kernels/cross_entropy.h"

#include "kernels/check.h"
#include "kernels/elementwise.h"
#include "ops/cpu/cross_entropy.h"
#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void cross_entropy_row_max(const DeviceContext& ctx, float* max, const void* logits,
                           tensor::DType dtype, std::int64_t n, std::int64_t v) {
  kernels::cross_entropy_row_max(max, logits, dtype, n, v, stream_of(ctx));
}

void cross_entropy_target_logit(const DeviceContext& ctx, float* target_logit, const void* logits,
                                tensor::DType dtype, const std::int64_t* targets, const float* max,
                                std::int64_t n, std::int64_t v, std::int64_t vocab_start) {
  kernels::cross_entropy_target_logit(target_logit, logits, dtype, targets, max, n, v, vocab_start,
                                      stream_of(ctx));
}

void cross_entropy_exp_sum(const DeviceContext& ctx, float* sum_exp, void* logits,
                           tensor::DType dtype, const float* max, std::int64_t n, std::int64_t v) {
  kernels::cross_entropy_exp_sum(sum_exp, logits, dtype, max, n, v, stream_of(ctx));
}

void cross_entropy_loss(const DeviceContext& ctx, float* loss, const float* sum_exp,
                        const float* target_logit, std::int64_t n) {
  kernels::cross_entropy_loss(loss, sum_exp, target_logit, n, stream_of(ctx));
}

void cross_entropy_forward(const DeviceContext& ctx, float* loss, float* max, float* sum_exp,
                           void* logits, tensor::DType dtype, const std::int64_t* targets,
                           std::int64_t n, std::int64_t v) {
  kernels::cross_entropy_forward(loss, max, sum_exp, logits, dtype, targets, n, v, stream_of(ctx));
}

void cross_entropy_backward(const DeviceContext& ctx, void* dlogits, const void* logits,
                            tensor::DType dtype, const std::int64_t* targets, const float* max,
                            const float* sum_exp, const float* dloss, std::int64_t n,
                            std::int64_t v, std::int64_t vocab_start) {
  kernels::cross_entropy_backward(dlogits, logits, dtype, targets, max, sum_exp, dloss, n, v,
                                  vocab_start, stream_of(ctx));
}

void cross_entropy_forward_backward(const DeviceContext& ctx, float* loss, void* dlogits,
                                    const void* logits, tensor::DType dtype,
                                    const std::int64_t* targets, const float* dloss, std::int64_t n,
                                    std::int64_t v) {
  kernels::cross_entropy_forward_backward(loss, dlogits, logits, dtype, targets, dloss, n, v,
                                          stream_of(ctx), ctx.cuda().kernel_shapes.get(),
                                          &ctx.cuda().scratch);
}

namespace {

// n floats from the device into the context's staging area at `offset`, after the work queued
// before (the stream is waited for by the caller).
float* stage(Resources& r, const float* device, std::int64_t n, std::size_t offset) {
  float* host = r.staging.data() + offset;
  kernels::check_cuda(cudaMemcpyAsync(host, device, static_cast<std::size_t>(n) * sizeof(float),
                                      cudaMemcpyDeviceToHost, r.stream),
                      "masked_mean_loss (copy to the host)");
  return host;
}

}  // namespace

// The per-token losses are a few thousand floats: bringing them over costs less than a device
// reduction would save, and the host sum is ops/cpu's own, in the same order.
float masked_mean_loss(const DeviceContext& ctx, const float* loss, const float* mask,
                       std::int64_t n) {
  Resources& r = ctx.cuda();
  r.staging.resize(2 * static_cast<std::size_t>(n));
  const float* host_loss = stage(r, loss, n, 0);
  const float* host_mask = stage(r, mask, n, static_cast<std::size_t>(n));
  kernels::check_cuda(cudaStreamSynchronize(r.stream), "masked_mean_loss (synchronize)");
  return cpu::masked_mean_loss(host_loss, host_mask, n);
}

double loss_mask_sum(const DeviceContext& ctx, const float* mask, std::int64_t n) {
  Resources& r = ctx.cuda();
  r.staging.resize(static_cast<std::size_t>(n));
  const float* host_mask = stage(r, mask, n, 0);
  kernels::check_cuda(cudaStreamSynchronize(r.stream), "loss_mask_sum (synchronize)");
  return cpu::loss_mask_sum(host_mask, n);
}

void masked_mean_loss_backward(const DeviceContext& ctx, float* dloss, const float* mask,
                               std::int64_t n, float grad, double mask_sum) {
  const auto factor = static_cast<float>(grad / mask_sum);  // cpu::masked_mean_loss_backward's
  kernels::scale(dloss, mask, factor, n, stream_of(ctx));
}

}  // namespace mds::ops::cuda
