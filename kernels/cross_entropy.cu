#include "kernels/check.h"
#include "kernels/cross_entropy.h"
#include "kernels/cross_entropy_kernels.cuh"
#include "kernels/device_common.cuh"
#include "kernels/launch.cuh"

namespace mds::kernels {

namespace {

using detail::launch;
using detail::Storage;
using detail::with_storage;
using tensor::DType;
using namespace cross_entropy_detail;

}  // namespace

void cross_entropy_row_max(float* max, const void* logits, DType dtype, std::int64_t n,
                           std::int64_t v, cudaStream_t stream) {
  with_storage(dtype, "cross_entropy_row_max", [&](auto s) {
    if (n <= 0) return;
    constexpr Storage kS = decltype(s)::value;
    const auto kernel =
        rows_by_8(v, {logits}) ? row_max_kernel<kS, true> : row_max_kernel<kS, false>;
    launch("kernels::cross_entropy_row_max", kernel, row_shape(n), stream, max, logits, v);
  });
}

void cross_entropy_target_logit(float* target_logit, const void* logits, DType dtype,
                                const std::int64_t* targets, const float* max, std::int64_t n,
                                std::int64_t v, std::int64_t vocab_start, cudaStream_t stream) {
  with_storage(dtype, "cross_entropy_target_logit", [&](auto s) {
    if (n <= 0) return;
    launch("kernels::cross_entropy_target_logit", target_logit_kernel<decltype(s)::value>,
           target_logit_shape(n), stream, target_logit, logits, targets, max, n, v, vocab_start);
  });
}

void cross_entropy_exp_sum(float* sum_exp, void* logits, DType dtype, const float* max,
                           std::int64_t n, std::int64_t v, cudaStream_t stream) {
  with_storage(dtype, "cross_entropy_exp_sum", [&](auto s) {
    if (n <= 0) return;
    constexpr Storage kS = decltype(s)::value;
    const auto kernel =
        rows_by_8(v, {logits}) ? exp_sum_kernel<kS, true> : exp_sum_kernel<kS, false>;
    launch("kernels::cross_entropy_exp_sum", kernel, row_shape(n), stream, sum_exp, logits, max, v);
  });
}

void cross_entropy_loss(float* loss, const float* sum_exp, const float* target_logit,
                        std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch("kernels::cross_entropy_loss", loss_kernel, loss_shape(n), stream, loss, sum_exp,
         target_logit, n);
}

void cross_entropy_forward(float* loss, float* max, float* sum_exp, void* logits, DType dtype,
                           const std::int64_t* targets, std::int64_t n, std::int64_t v,
                           cudaStream_t stream) {
  with_storage(dtype, "cross_entropy_forward", [&](auto s) {
    if (n <= 0) return;
    constexpr Storage kS = decltype(s)::value;
    const auto kernel =
        rows_by_8(v, {logits}) ? forward_kernel<kS, true> : forward_kernel<kS, false>;
    launch("kernels::cross_entropy_forward", kernel, row_shape(n), stream, loss, max, sum_exp,
           logits, targets, v);
  });
}

void cross_entropy_backward(void* dlogits, const void* logits, DType dtype,
                            const std::int64_t* targets, const float* max, const float* sum_exp,
                            const float* dloss, std::int64_t n, std::int64_t v,
                            std::int64_t vocab_start, cudaStream_t stream) {
  with_storage(dtype, "cross_entropy_backward", [&](auto s) {
    if (n <= 0) return;
    constexpr Storage kS = decltype(s)::value;
    const auto kernel =
        rows_by_8(v, {dlogits, logits}) ? backward_kernel<kS, true> : backward_kernel<kS, false>;
    launch("kernels::cross_entropy_backward", kernel, row_shape(n), stream, dlogits, logits,
           targets, max, sum_exp, dloss, v, vocab_start);
  });
}

void cross_entropy_forward_backward(float* loss, void* dlogits, const void* logits, DType dtype,
                                    const std::int64_t* targets, const float* dloss, std::int64_t n,
                                    std::int64_t v, cudaStream_t stream) {
  with_storage(dtype, "cross_entropy_forward_backward", [&](auto s) {
    if (n <= 0) return;
    constexpr Storage kS = decltype(s)::value;
    int device = 0, sms = 0, l2_bytes = 0;
    check_cuda(cudaGetDevice(&device), "kernels::cross_entropy_forward_backward (cudaGetDevice)");
    check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
               "kernels::cross_entropy_forward_backward (SM count)");
    check_cuda(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device),
               "kernels::cross_entropy_forward_backward (L2 size)");
    const auto kernel = rows_by_8(v, {dlogits, logits}) ? forward_backward_kernel<kS, true>
                                                        : forward_backward_kernel<kS, false>;
    launch("kernels::cross_entropy_forward_backward", kernel,
           forward_backward_shape(n, v, kS == Storage::kF32 ? 4 : 2, sms, l2_bytes), stream, loss,
           dlogits, logits, targets, dloss, n, v);
  });
}

void cross_entropy_row_max(float* max, const float* logits, std::int64_t n, std::int64_t v,
                           cudaStream_t stream) {
  cross_entropy_row_max(max, logits, DType::kFloat32, n, v, stream);
}

void cross_entropy_target_logit(float* target_logit, const float* logits,
                                const std::int64_t* targets, const float* max, std::int64_t n,
                                std::int64_t v, std::int64_t vocab_start, cudaStream_t stream) {
  cross_entropy_target_logit(target_logit, logits, DType::kFloat32, targets, max, n, v, vocab_start,
                             stream);
}

void cross_entropy_exp_sum(float* sum_exp, float* logits, const float* max, std::int64_t n,
                           std::int64_t v, cudaStream_t stream) {
  cross_entropy_exp_sum(sum_exp, logits, DType::kFloat32, max, n, v, stream);
}

void cross_entropy_forward(float* loss, float* max, float* sum_exp, float* logits,
                           const std::int64_t* targets, std::int64_t n, std::int64_t v,
                           cudaStream_t stream) {
  cross_entropy_forward(loss, max, sum_exp, logits, DType::kFloat32, targets, n, v, stream);
}

void cross_entropy_backward(float* dlogits, const float* exp_logits, const std::int64_t* targets,
                            const float* sum_exp, const float* dloss, std::int64_t n,
                            std::int64_t v, std::int64_t vocab_start, cudaStream_t stream) {
  cross_entropy_backward(dlogits, exp_logits, DType::kFloat32, targets, nullptr, sum_exp, dloss, n,
                         v, vocab_start, stream);
}

}  // namespace mds::kernels
