#include "ops/cross_entropy.h"

#include <vector>

#include "base/error.h"
#include "ops/activation_dtype.h"
#include "ops/check.h"
#include "ops/cpu/cross_entropy.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

namespace {

// Token count, vocab shard width and dtype of logits [..., V] (fp32, bf16 or fp16).
struct Rows {
  std::int64_t n;
  std::int64_t v;
  DType dtype;
  bool fp32() const { return dtype == DType::kFloat32; }
};

Rows logits_rows(const char* op, const Tensor& logits) {
  const DType dtype = detail::activation_dtype(op, {"logits", logits}, {});
  if (logits.shape().rank() < 2) {
    base::fail("ops::", op, ": logits must be [tokens..., vocab], got ",
               logits.shape().to_string());
  }
  const std::int64_t v = logits.dim(logits.shape().rank() - 1);
  return {v == 0 ? 0 : logits.numel() / v, v, dtype};
}

void per_token(const char* op, detail::Arg arg, std::int64_t n) {
  detail::expect_dtype(op, arg, DType::kFloat32);
  detail::expect_numel(op, arg, n);
}

// Device targets are not read back: their range is the caller's (GptModel checks the labels on
// the host before it copies them over).
void check_targets(const char* op, const Tensor& targets, std::int64_t n) {
  detail::expect_dtype(op, {"targets", targets}, DType::kInt64);
  detail::expect_numel(op, {"targets", targets}, n);
  if (targets.device().kind != tensor::DeviceKind::kCpu) return;
  const std::int64_t* ids = targets.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0) base::fail("ops::", op, ": negative target id ", ids[i], " at token ", i);
  }
}

}  // namespace

void cross_entropy_row_max(const DeviceContext& ctx, Tensor max, Tensor logits) {
  constexpr const char* kOp = "cross_entropy_row_max";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"max", max}, {"logits", logits}});
  const Rows r = logits_rows(kOp, logits);
  per_token(kOp, {"max", max}, r.n);
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::cross_entropy_row_max(ctx, max.data<float>(), logits.raw(), r.dtype, r.n, r.v);
    return;
  }
  if (r.fp32()) {
    cpu::cross_entropy_row_max(max.data<float>(), logits.data<float>(), r.n, r.v);
  } else {
    cpu::cross_entropy_row_max(max.data<float>(), logits.raw(), r.dtype, r.n, r.v);
  }
}

void cross_entropy_target_logit(const DeviceContext& ctx, Tensor target_logit, Tensor logits,
                                Tensor targets, Tensor max, std::int64_t vocab_start) {
  constexpr const char* kOp = "cross_entropy_target_logit";
  const bool on_device = detail::on_cuda(
      kOp, ctx,
      {{"target_logit", target_logit}, {"logits", logits}, {"targets", targets}, {"max", max}});
  const Rows r = logits_rows(kOp, logits);
  per_token(kOp, {"target_logit", target_logit}, r.n);
  per_token(kOp, {"max", max}, r.n);
  check_targets(kOp, targets, r.n);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::cross_entropy_target_logit(ctx, target_logit.data<float>(), logits.raw(), r.dtype,
                                       targets.data<std::int64_t>(), max.data<float>(), r.n, r.v,
                                       vocab_start);
    }
    return;
  }
  if (r.fp32()) {
    cpu::cross_entropy_target_logit(target_logit.data<float>(), logits.data<float>(),
                                    targets.data<std::int64_t>(), max.data<float>(), r.n, r.v,
                                    vocab_start);
  } else {
    cpu::cross_entropy_target_logit(target_logit.data<float>(), logits.raw(), r.dtype,
                                    targets.data<std::int64_t>(), max.data<float>(), r.n, r.v,
                                    vocab_start);
  }
}

void cross_entropy_exp_sum(const DeviceContext& ctx, Tensor sum_exp, Tensor logits, Tensor max) {
  constexpr const char* kOp = "cross_entropy_exp_sum";
  const bool on_device =
      detail::on_cuda(kOp, ctx, {{"sum_exp", sum_exp}, {"logits", logits}, {"max", max}});
  const Rows r = logits_rows(kOp, logits);
  per_token(kOp, {"sum_exp", sum_exp}, r.n);
  per_token(kOp, {"max", max}, r.n);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::cross_entropy_exp_sum(ctx, sum_exp.data<float>(), logits.raw(), r.dtype,
                                  max.data<float>(), r.n, r.v);
    }
    return;
  }
  if (r.fp32()) {
    cpu::cross_entropy_exp_sum(sum_exp.data<float>(), logits.data<float>(), max.data<float>(), r.n,
                               r.v);
  } else {
    cpu::cross_entropy_exp_sum(sum_exp.data<float>(), logits.raw(), r.dtype, max.data<float>(), r.n,
                               r.v);
  }
}

void cross_entropy_loss(const DeviceContext& ctx, Tensor loss, Tensor sum_exp,
                        Tensor target_logit) {
  constexpr const char* kOp = "cross_entropy_loss";
  const bool on_device = detail::on_cuda(
      kOp, ctx, {{"loss", loss}, {"sum_exp", sum_exp}, {"target_logit", target_logit}});
  const std::int64_t n = loss.numel();
  per_token(kOp, {"loss", loss}, n);
  per_token(kOp, {"sum_exp", sum_exp}, n);
  per_token(kOp, {"target_logit", target_logit}, n);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::cross_entropy_loss(ctx, loss.data<float>(), sum_exp.data<float>(),
                               target_logit.data<float>(), n);
    }
    return;
  }
  cpu::cross_entropy_loss(loss.data<float>(), sum_exp.data<float>(), target_logit.data<float>(), n);
}

void cross_entropy_forward(const DeviceContext& ctx, Tensor loss, Tensor max, Tensor sum_exp,
                           Tensor logits, Tensor targets) {
  constexpr const char* kOp = "cross_entropy_forward";
  const bool on_device = detail::on_cuda(kOp, ctx,
                                         {{"loss", loss},
                                          {"max", max},
                                          {"sum_exp", sum_exp},
                                          {"logits", logits},
                                          {"targets", targets}});
  const Rows r = logits_rows(kOp, logits);
  check_targets(kOp, targets, r.n);
  if (on_device) {
    // One fused kernel for steps 1–4.
    per_token(kOp, {"loss", loss}, r.n);
    per_token(kOp, {"max", max}, r.n);
    per_token(kOp, {"sum_exp", sum_exp}, r.n);
    if constexpr (detail::kCudaBuilt) {
      cuda::cross_entropy_forward(ctx, loss.data<float>(), max.data<float>(), sum_exp.data<float>(),
                                  logits.raw(), r.dtype, targets.data<std::int64_t>(), r.n, r.v);
    }
    return;
  }
  const std::int64_t* ids = targets.data<std::int64_t>();
  for (std::int64_t i = 0; i < r.n; ++i) {
    if (ids[i] >= r.v) {
      base::fail("ops::cross_entropy_forward: target id ", ids[i], " at token ", i,
                 " is not below the vocabulary size ", r.v);
    }
  }
  cross_entropy_row_max(ctx, max, logits);
  // The loss tensor holds the target logits until the last step overwrites them in place.
  cross_entropy_target_logit(ctx, loss, logits, targets, max, 0);
  cross_entropy_exp_sum(ctx, sum_exp, logits, max);
  cross_entropy_loss(ctx, loss, sum_exp, loss);
}

void cross_entropy_backward(const DeviceContext& ctx, Tensor dlogits, Tensor logits, Tensor targets,
                            Tensor max, Tensor sum_exp, Tensor dloss, std::int64_t vocab_start) {
  constexpr const char* kOp = "cross_entropy_backward";
  const bool on_device = detail::on_cuda(kOp, ctx,
                                         {{"dlogits", dlogits},
                                          {"logits", logits},
                                          {"targets", targets},
                                          {"max", max},
                                          {"sum_exp", sum_exp},
                                          {"dloss", dloss}});
  const Rows r = logits_rows(kOp, logits);
  detail::activation_dtype(kOp, {"logits", logits}, {{"dlogits", dlogits}});
  detail::expect_shape(kOp, {"dlogits", dlogits}, logits.shape());
  per_token(kOp, {"max", max}, r.n);
  per_token(kOp, {"sum_exp", sum_exp}, r.n);
  per_token(kOp, {"dloss", dloss}, r.n);
  check_targets(kOp, targets, r.n);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::cross_entropy_backward(
          ctx, dlogits.raw(), logits.raw(), r.dtype, targets.data<std::int64_t>(),
          max.data<float>(), sum_exp.data<float>(), dloss.data<float>(), r.n, r.v, vocab_start);
    }
    return;
  }
  if (r.fp32()) {
    // The forward left the exps in the logits: max is not needed.
    cpu::cross_entropy_backward(dlogits.data<float>(), logits.data<float>(),
                                targets.data<std::int64_t>(), sum_exp.data<float>(),
                                dloss.data<float>(), r.n, r.v, vocab_start);
  } else {
    cpu::cross_entropy_backward(dlogits.raw(), logits.raw(), r.dtype, targets.data<std::int64_t>(),
                                max.data<float>(), sum_exp.data<float>(), dloss.data<float>(), r.n,
                                r.v, vocab_start);
  }
}

void cross_entropy_forward_backward(const DeviceContext& ctx, Tensor loss, Tensor dlogits,
                                    Tensor logits, Tensor targets, Tensor dloss) {
  constexpr const char* kOp = "cross_entropy_forward_backward";
  const bool on_device = detail::on_cuda(kOp, ctx,
                                         {{"loss", loss},
                                          {"dlogits", dlogits},
                                          {"logits", logits},
                                          {"targets", targets},
                                          {"dloss", dloss}});
  const Rows r = logits_rows(kOp, logits);
  detail::activation_dtype(kOp, {"logits", logits}, {{"dlogits", dlogits}});
  detail::expect_shape(kOp, {"dlogits", dlogits}, logits.shape());
  per_token(kOp, {"loss", loss}, r.n);
  per_token(kOp, {"dloss", dloss}, r.n);
  check_targets(kOp, targets, r.n);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::cross_entropy_forward_backward(ctx, loss.data<float>(), dlogits.raw(), logits.raw(),
                                           r.dtype, targets.data<std::int64_t>(),
                                           dloss.data<float>(), r.n, r.v);
    }
    return;
  }
  // The statistics the two ops pass between them, on the host for this call only.
  std::vector<float> max(static_cast<std::size_t>(r.n)), sum_exp(max.size());
  const Tensor max_t(max.data(), DType::kFloat32, tensor::Shape{r.n});
  const Tensor sum_exp_t(sum_exp.data(), DType::kFloat32, tensor::Shape{r.n});
  cross_entropy_forward(ctx, loss, max_t, sum_exp_t, logits, targets);
  cross_entropy_backward(ctx, dlogits, logits, targets, max_t, sum_exp_t, dloss, 0);
}

float masked_mean_loss(const DeviceContext& ctx, Tensor loss, Tensor mask) {
  constexpr const char* kOp = "masked_mean_loss";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"loss", loss}, {"mask", mask}});
  per_token(kOp, {"loss", loss}, loss.numel());
  per_token(kOp, {"mask", mask}, loss.numel());
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      return cuda::masked_mean_loss(ctx, loss.data<float>(), mask.data<float>(), loss.numel());
    }
  }
  return cpu::masked_mean_loss(loss.data<float>(), mask.data<float>(), loss.numel());
}

double loss_mask_sum(const DeviceContext& ctx, Tensor mask) {
  constexpr const char* kOp = "loss_mask_sum";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"mask", mask}});
  detail::expect_dtype(kOp, {"mask", mask}, DType::kFloat32);
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      return cuda::loss_mask_sum(ctx, mask.data<float>(), mask.numel());
  }
  return cpu::loss_mask_sum(mask.data<float>(), mask.numel());
}

void masked_mean_loss_backward(const DeviceContext& ctx, Tensor dloss, Tensor mask, float grad) {
  constexpr const char* kOp = "masked_mean_loss_backward";
  detail::on_cuda(kOp, ctx, {{"dloss", dloss}, {"mask", mask}});
  per_token(kOp, {"mask", mask}, dloss.numel());
  masked_mean_loss_backward(ctx, dloss, mask, grad, loss_mask_sum(ctx, mask));
}

void masked_mean_loss_backward(const DeviceContext& ctx, Tensor dloss, Tensor mask, float grad,
                               double mask_sum) {
  constexpr const char* kOp = "masked_mean_loss_backward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"dloss", dloss}, {"mask", mask}});
  per_token(kOp, {"dloss", dloss}, dloss.numel());
  per_token(kOp, {"mask", mask}, dloss.numel());
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::masked_mean_loss_backward(ctx, dloss.data<float>(), mask.data<float>(), dloss.numel(),
                                      grad, mask_sum);
    }
    return;
  }
  cpu::masked_mean_loss_backward(dloss.data<float>(), mask.data<float>(), dloss.numel(), grad,
                                 mask_sum);
}

double loss_mask_sum(Tensor mask) {
  return loss_mask_sum(DeviceContext{}, mask);
}

void cross_entropy_row_max(Tensor max, Tensor logits) {
  cross_entropy_row_max(DeviceContext{}, max, logits);
}

void cross_entropy_target_logit(Tensor target_logit, Tensor logits, Tensor targets, Tensor max,
                                std::int64_t vocab_start) {
  cross_entropy_target_logit(DeviceContext{}, target_logit, logits, targets, max, vocab_start);
}

void cross_entropy_exp_sum(Tensor sum_exp, Tensor logits, Tensor max) {
  cross_entropy_exp_sum(DeviceContext{}, sum_exp, logits, max);
}

void cross_entropy_loss(Tensor loss, Tensor sum_exp, Tensor target_logit) {
  cross_entropy_loss(DeviceContext{}, loss, sum_exp, target_logit);
}

void cross_entropy_forward(Tensor loss, Tensor max, Tensor sum_exp, Tensor logits, Tensor targets) {
  cross_entropy_forward(DeviceContext{}, loss, max, sum_exp, logits, targets);
}

void cross_entropy_backward(Tensor dlogits, Tensor logits, Tensor targets, Tensor max,
                            Tensor sum_exp, Tensor dloss, std::int64_t vocab_start) {
  cross_entropy_backward(DeviceContext{}, dlogits, logits, targets, max, sum_exp, dloss,
                         vocab_start);
}

void cross_entropy_forward_backward(Tensor loss, Tensor dlogits, Tensor logits, Tensor targets,
                                    Tensor dloss) {
  cross_entropy_forward_backward(DeviceContext{}, loss, dlogits, logits, targets, dloss);
}

float masked_mean_loss(Tensor loss, Tensor mask) {
  return masked_mean_loss(DeviceContext{}, loss, mask);
}

void masked_mean_loss_backward(Tensor dloss, Tensor mask, float grad) {
  masked_mean_loss_backward(DeviceContext{}, dloss, mask, grad);
}

}  // namespace mds::ops
