#include "ops/adam.h"

#include <cmath>

#include "base/error.h"
#include "ops/check.h"
#include "ops/cpu/adam.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

namespace {

struct BiasCorrections {
  float first, second;
};

// The checks of both steps; 1 − β^step computed in double (std::pow(float, int) in apex's host
// code) and rounded to float.
BiasCorrections checked_step(const char* op, const Tensor& params, const Tensor& grads,
                             const Tensor& exp_avg, const Tensor& exp_avg_sq,
                             const AdamWConfig& config, std::int64_t step) {
  for (const detail::Arg arg : {detail::Arg{"params", params},
                                {"grads", grads},
                                {"exp_avg", exp_avg},
                                {"exp_avg_sq", exp_avg_sq}}) {
    detail::expect_dtype(op, arg, DType::kFloat32);
    detail::expect_numel(op, arg, params.numel());
  }
  if (step < 1) base::fail("ops::", op, ": step must be >= 1, got ", step);
  return {static_cast<float>(1.0 - std::pow(static_cast<double>(config.beta1), step)),
          static_cast<float>(1.0 - std::pow(static_cast<double>(config.beta2), step))};
}

}  // namespace

void adamw_step(const DeviceContext& ctx, Tensor params, Tensor grads, Tensor exp_avg,
                Tensor exp_avg_sq, const AdamWConfig& config, std::int64_t step) {
  constexpr const char* kOp = "adamw_step";
  const bool on_device = detail::on_cuda(
      kOp, ctx,
      {{"params", params}, {"grads", grads}, {"exp_avg", exp_avg}, {"exp_avg_sq", exp_avg_sq}});
  const BiasCorrections bc = checked_step(kOp, params, grads, exp_avg, exp_avg_sq, config, step);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::adamw_step(ctx, params.data<float>(), grads.data<float>(), exp_avg.data<float>(),
                       exp_avg_sq.data<float>(), params.numel(), config, bc.first, bc.second);
    }
    return;
  }
  cpu::adamw_step(params.data<float>(), grads.data<float>(), exp_avg.data<float>(),
                  exp_avg_sq.data<float>(), params.numel(), config, bc.first, bc.second);
}

void adamw_step_and_cast(const DeviceContext& ctx, Tensor params, Tensor grads, Tensor exp_avg,
                         Tensor exp_avg_sq, const AdamWConfig& config, std::int64_t step,
                         Tensor low) {
  constexpr const char* kOp = "adamw_step_and_cast";
  const bool on_device = detail::on_cuda(kOp, ctx,
                                         {{"params", params},
                                          {"grads", grads},
                                          {"exp_avg", exp_avg},
                                          {"exp_avg_sq", exp_avg_sq},
                                          {"low", low}});
  const BiasCorrections bc = checked_step(kOp, params, grads, exp_avg, exp_avg_sq, config, step);
  if (low.dtype() != DType::kBFloat16 && low.dtype() != DType::kFloat16) {
    base::fail("ops::", kOp, ": low must be bf16 or fp16, got ", tensor::dtype_name(low.dtype()));
  }
  detail::expect_numel(kOp, {"low", low}, params.numel());
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::adamw_step_and_cast(ctx, params.data<float>(), grads.data<float>(),
                                exp_avg.data<float>(), exp_avg_sq.data<float>(), params.numel(),
                                config, bc.first, bc.second, low.raw(), low.dtype());
    }
    return;
  }
  cpu::adamw_step_and_cast(params.data<float>(), grads.data<float>(), exp_avg.data<float>(),
                           exp_avg_sq.data<float>(), params.numel(), config, bc.first, bc.second,
                           low.raw(), low.dtype());
}

double sum_of_squares(const DeviceContext& ctx, Tensor x) {
  constexpr const char* kOp = "sum_of_squares";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"x", x}});
  detail::expect_dtype(kOp, {"x", x}, DType::kFloat32);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) return cuda::sum_of_squares(ctx, x.data<float>(), x.numel());
  }
  return cpu::sum_of_squares(x.data<float>(), x.numel());
}

double l2_norm(const DeviceContext& ctx, Tensor x) {
  return std::sqrt(sum_of_squares(ctx, x));
}

void adamw_step(Tensor params, Tensor grads, Tensor exp_avg, Tensor exp_avg_sq,
                const AdamWConfig& config, std::int64_t step) {
  adamw_step(DeviceContext{}, params, grads, exp_avg, exp_avg_sq, config, step);
}

double sum_of_squares(Tensor x) {
  return sum_of_squares(DeviceContext{}, x);
}

double l2_norm(Tensor x) {
  return l2_norm(DeviceContext{}, x);
}

}  // namespace mds::ops
