#include "train/grad_accumulation.h"

#include <cstdint>

#include "base/error.h"
#include "ops/gradients.h"

namespace mds::train {
namespace {

using tensor::DType;

bool is_grad_dtype(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

}  // namespace

void accumulate_gradient(tensor::Tensor accumulator, tensor::Tensor micro, DType grad_dtype) {
  accumulate_gradient(ops::DeviceContext{}, accumulator, micro, grad_dtype);
}

void accumulate_gradient(const ops::DeviceContext& ctx, tensor::Tensor accumulator,
                         tensor::Tensor micro, DType grad_dtype, ops::AccumulateSteps steps) {
  ops::accumulate_rounded(ctx, accumulator, micro, grad_dtype, steps);
}

void round_through(tensor::Tensor grads, DType dtype) {
  train::round_through(ops::DeviceContext{}, grads, dtype);
}

void round_through(const ops::DeviceContext& ctx, tensor::Tensor grads, DType dtype) {
  if (!is_grad_dtype(dtype))
    base::fail("round_through: unsupported communication dtype ", tensor::dtype_name(dtype));
  if (dtype == grads.dtype() || dtype == DType::kFloat32) return;  // exact both ways
  ops::round_through(ctx, grads, dtype);
}

void scale_in_dtype(tensor::Tensor x, double factor) {
  train::scale_in_dtype(ops::DeviceContext{}, x, factor);
}

void scale_in_dtype(const ops::DeviceContext& ctx, tensor::Tensor x, double factor) {
  ops::scale_in_dtype(ctx, x, static_cast<float>(factor));
}

void divide_in_dtype(tensor::Tensor x, double divisor) {
  train::divide_in_dtype(ops::DeviceContext{}, x, divisor);
}

void divide_in_dtype(const ops::DeviceContext& ctx, tensor::Tensor x, double divisor) {
  ops::divide_in_dtype(ctx, x, static_cast<float>(divisor));
}

bool has_inf_or_nan(tensor::Tensor x) {
  return ops::has_inf_or_nan(ops::DeviceContext{}, x);
}

bool has_inf_or_nan(const ops::DeviceContext& ctx, tensor::Tensor x) {
  return ops::has_inf_or_nan(ctx, x);
}

}  // namespace mds::train
