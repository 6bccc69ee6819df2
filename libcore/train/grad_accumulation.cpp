#include "train/grad_accumulation.h"

#include <cstdint>

#include "base/error.h"
#include "ops/gradients.h"

namespace mds::train {
namespace {

using tensor::DType;

void expect_cpu(const char* what, const tensor::Tensor& x) {
  if (x.device().kind != tensor::DeviceKind::kCpu)
    base::fail(what, ": only host tensors are supported");
}

void expect_dtype(const char* what, const tensor::Tensor& x, bool ok) {
  if (!ok) base::fail(what, ": unsupported dtype ", tensor::dtype_name(x.dtype()));
}

bool is_grad_dtype(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

}  // namespace

void accumulate_gradient(tensor::Tensor accumulator, tensor::Tensor micro, DType grad_dtype) {
  accumulate_gradient(ops::DeviceContext{}, accumulator, micro, grad_dtype);
}

void accumulate_gradient(const ops::DeviceContext& ctx, tensor::Tensor accumulator,
                         tensor::Tensor micro, DType grad_dtype) {
  ops::accumulate_rounded(ctx, accumulator, micro, grad_dtype);
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

namespace {

template <typename Op>
void map_in_dtype(const char* what, tensor::Tensor x, Op op) {
  expect_cpu(what, x);
  expect_dtype(what, x, is_grad_dtype(x.dtype()));
  const std::int64_t n = x.numel();
  const DType dtype = x.dtype();
  if (dtype == DType::kFloat32) {
    float* v = x.data<float>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) v[i] = op(v[i]);
  } else if (dtype == DType::kBFloat16) {
    tensor::BFloat16* v = x.data<tensor::BFloat16>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) v[i] = tensor::to_bfloat16(op(tensor::to_float(v[i])));
  } else {
    tensor::Float16* v = x.data<tensor::Float16>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) v[i] = tensor::to_float16(op(tensor::to_float(v[i])));
  }
}

}  // namespace

void scale_in_dtype(tensor::Tensor x, double factor) {
  const float f = static_cast<float>(factor);
  map_in_dtype("scale_in_dtype", x, [f](float v) { return v * f; });
}

void divide_in_dtype(tensor::Tensor x, double divisor) {
  const float d = static_cast<float>(divisor);
  map_in_dtype("divide_in_dtype", x, [d](float v) { return v / d; });
}

bool has_inf_or_nan(tensor::Tensor x) {
  return ops::has_inf_or_nan(ops::DeviceContext{}, x);
}

bool has_inf_or_nan(const ops::DeviceContext& ctx, tensor::Tensor x) {
  return ops::has_inf_or_nan(ctx, x);
}

}  // namespace mds::train
