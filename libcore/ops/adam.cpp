#include "ops/adam.h"

#include <cmath>

#include "base/error.h"
#include "ops/check.h"
#include "ops/cpu/adam.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

void adamw_step(const DeviceContext& ctx, Tensor params, Tensor grads, Tensor exp_avg,
                Tensor exp_avg_sq, const AdamWConfig& config, std::int64_t step) {
  constexpr const char* kOp = "adamw_step";
  const bool on_device = detail::on_cuda(
      kOp, ctx,
      {{"params", params}, {"grads", grads}, {"exp_avg", exp_avg}, {"exp_avg_sq", exp_avg_sq}});
  for (const detail::Arg arg : {detail::Arg{"params", params},
                                {"grads", grads},
                                {"exp_avg", exp_avg},
                                {"exp_avg_sq", exp_avg_sq}}) {
    detail::expect_dtype(kOp, arg, DType::kFloat32);
    detail::expect_numel(kOp, arg, params.numel());
  }
  if (step < 1) base::fail("ops::", kOp, ": step must be >= 1, got ", step);
  // std::pow(float, int) is evaluated in double, as in apex's host code.
  const auto bias_correction1 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(config.beta1), step));
  const auto bias_correction2 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(config.beta2), step));
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::adamw_step(ctx, params.data<float>(), grads.data<float>(), exp_avg.data<float>(),
                       exp_avg_sq.data<float>(), params.numel(), config, bias_correction1,
                       bias_correction2);
    }
    return;
  }
  cpu::adamw_step(params.data<float>(), grads.data<float>(), exp_avg.data<float>(),
                  exp_avg_sq.data<float>(), params.numel(), config, bias_correction1,
                  bias_correction2);
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
