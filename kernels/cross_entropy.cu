#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "kernels/cross_entropy.h"
#include "kernels/cross_entropy_kernels.cuh"
#include "kernels/device_common.cuh"
#include "kernels/launch.cuh"
#include "kernels/variant_trials.h"

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

namespace {

// The ways cross_entropy_forward_backward can run on 16-bit logits, the same bits each: the one
// kernel in forward_backward_shape's grid or in twice its blocks an SM, or the forward kernel
// then the backward kernel (max and sum_exp through memory).
enum FusedVariant { kOneKernel = 0, kOneKernelTwiceTheBlocks = 1, kTwoKernels = 2 };

struct FusedCall {
  float* loss;
  void* dlogits;
  const void* logits;
  DType dtype;
  const std::int64_t* targets;
  const float* dloss;
  std::int64_t n, v;
};

// The current device's SM count and L2 bytes, which the one kernel's grid and its trials size by.
struct DeviceSize {
  int sms = 0, l2_bytes = 0;
};

DeviceSize current_device_size() {
  int device = 0;
  DeviceSize size;
  check_cuda(cudaGetDevice(&device), "kernels::cross_entropy_forward_backward (cudaGetDevice)");
  check_cuda(cudaDeviceGetAttribute(&size.sms, cudaDevAttrMultiProcessorCount, device),
             "kernels::cross_entropy_forward_backward (SM count)");
  check_cuda(cudaDeviceGetAttribute(&size.l2_bytes, cudaDevAttrL2CacheSize, device),
             "kernels::cross_entropy_forward_backward (L2 size)");
  return size;
}

// The one kernel in forward_backward_shape's grid, its blocks an SM times `scale`.
void run_one_kernel(const FusedCall& c, int scale, cudaStream_t stream) {
  with_storage(c.dtype, "cross_entropy_forward_backward", [&](auto s) {
    constexpr Storage kS = decltype(s)::value;
    const DeviceSize device = current_device_size();
    const auto kernel = rows_by_8(c.v, {c.dlogits, c.logits}) ? forward_backward_kernel<kS, true>
                                                              : forward_backward_kernel<kS, false>;
    launch("kernels::cross_entropy_forward_backward", kernel,
           forward_backward_shape(c.n, c.v, kS == Storage::kF32 ? 4 : 2, device.sms,
                                  device.l2_bytes, scale),
           stream, c.loss, c.dlogits, c.logits, c.targets, c.dloss, c.n, c.v);
  });
}

// `variant` (16-bit logits; `stats` holds 2n floats for kTwoKernels).
void run_variant(const FusedCall& c, int variant, float* stats, cudaStream_t stream) {
  if (variant != kTwoKernels) {
    run_one_kernel(c, variant == kOneKernelTwiceTheBlocks ? 2 : 1, stream);
    return;
  }
  // 16-bit logits are only read by the forward kernel.
  cross_entropy_forward(c.loss, stats, stats + c.n, const_cast<void*>(c.logits), c.dtype, c.targets,
                        c.n, c.v, stream);
  cross_entropy_backward(c.dlogits, c.logits, c.dtype, c.targets, stats, stats + c.n, c.dloss, c.n,
                         c.v, 0, stream);
}

// The variant picked for this problem, timed on its first call over its first rows (enough for
// four times the L2, so that the one kernel's L2 reuse shows) into scratch outputs.
int pick_variant(ops::LaunchVariantChoices& variants, const FusedCall& c, cudaStream_t stream) {
  const std::string key = std::string("cross_entropy_forward_backward ") +
                          std::string(tensor::dtype_name(c.dtype)) + " n=" + std::to_string(c.n) +
                          " v=" + std::to_string(c.v);
  if (const std::optional<int> known = variants.find(key)) return *known;
  const auto l2_bytes = static_cast<std::size_t>(current_device_size().l2_bytes);
  const auto row_bytes = static_cast<std::size_t>(c.v) * tensor::dtype_size(c.dtype);
  const std::int64_t rows =
      std::min<std::int64_t>(c.n, static_cast<std::int64_t>(4 * l2_bytes / row_bytes) + 1);
  const std::size_t grad_bytes = static_cast<std::size_t>(rows) * row_bytes;
  const std::size_t float_bytes = static_cast<std::size_t>(rows) * sizeof(float);
  const std::size_t floats_at = (grad_bytes + 255) / 256 * 256;  // aligned for the loss and stats
  const TrialBuffer memory(floats_at + 3 * float_bytes, stream);
  if (memory.data() == nullptr) {
    variants.record_default(key, kNoTrialMemory);
    return kOneKernel;
  }
  char* base = static_cast<char*>(memory.data());
  FusedCall trial = c;
  trial.dlogits = base;
  trial.loss = reinterpret_cast<float*>(base + floats_at);
  trial.n = rows;
  float* stats = trial.loss + rows;
  return choose_variant(
      variants, key, {"one kernel", "one kernel, twice the blocks", "two kernels"},
      [&](int variant) { run_variant(trial, variant, stats, stream); },
      {{trial.dlogits, grad_bytes}, {trial.loss, float_bytes}}, stream);
}

}  // namespace

void cross_entropy_forward_backward(float* loss, void* dlogits, const void* logits, DType dtype,
                                    const std::int64_t* targets, const float* dloss, std::int64_t n,
                                    std::int64_t v, cudaStream_t stream,
                                    ops::LaunchVariantChoices* variants, Scratch* scratch) {
  if (n <= 0) return;
  const FusedCall call{loss, dlogits, logits, dtype, targets, dloss, n, v};
  // fp32 rows have one way: the two kernels would overwrite the logits with exps.
  const int variant = variants != nullptr && dtype != DType::kFloat32
                          ? pick_variant(*variants, call, stream)
                          : kOneKernel;
  if (variant != kTwoKernels) {
    run_variant(call, variant, nullptr, stream);
    return;
  }
  const CallScratch stats(scratch, 2 * static_cast<std::size_t>(n) * sizeof(float), stream);
  run_variant(call, variant, static_cast<float*>(stats.data()), stream);
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
