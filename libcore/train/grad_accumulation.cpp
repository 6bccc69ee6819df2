#include "train/grad_accumulation.h"

#include <cmath>
#include <cstdint>

#include "base/error.h"
#include "ops/elementwise.h"

namespace mds::train {
namespace {

using tensor::DType;

float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::kBFloat16:
      return tensor::to_float(tensor::to_bfloat16(value));
    case DType::kFloat16:
      return tensor::to_float(tensor::to_float16(value));
    default:
      return value;
  }
}

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
  constexpr const char* kWhat = "accumulate_gradient";
  expect_cpu(kWhat, accumulator);
  expect_cpu(kWhat, micro);
  expect_dtype(kWhat, micro, micro.dtype() == DType::kFloat32);
  expect_dtype(kWhat, accumulator,
               accumulator.dtype() == DType::kFloat32 || accumulator.dtype() == DType::kFloat16);
  if (!is_grad_dtype(grad_dtype))
    base::fail(kWhat, ": unsupported gradient dtype ", tensor::dtype_name(grad_dtype));
  if (accumulator.numel() != micro.numel())
    base::fail(kWhat, ": ", accumulator.numel(), " accumulator elements but ", micro.numel(),
               " micro-batch elements");
  const std::int64_t n = micro.numel();
  const float* g = micro.data<float>();
  if (accumulator.dtype() == DType::kFloat32) {
    float* acc = accumulator.data<float>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) acc[i] += round_to(grad_dtype, g[i]);
  } else {
    tensor::Float16* acc = accumulator.data<tensor::Float16>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      acc[i] = tensor::to_float16(tensor::to_float(acc[i]) + round_to(grad_dtype, g[i]));
  }
}

void accumulate_gradient(const ops::DeviceContext& ctx, tensor::Tensor accumulator,
                         tensor::Tensor micro, DType grad_dtype) {
  if (accumulator.dtype() == DType::kFloat32 && micro.dtype() == DType::kFloat32 &&
      grad_dtype == DType::kFloat32 && accumulator.numel() == micro.numel()) {
    // acc[i] + g[i], the host loop's sum, wherever the buffers are.
    ops::add(ctx, accumulator, accumulator, micro.reshape(accumulator.shape()));
    return;
  }
  accumulate_gradient(accumulator, micro, grad_dtype);
}

void round_through(tensor::Tensor grads, DType dtype) {
  constexpr const char* kWhat = "round_through";
  if (!is_grad_dtype(dtype))
    base::fail(kWhat, ": unsupported communication dtype ", tensor::dtype_name(dtype));
  if (dtype == grads.dtype() || dtype == DType::kFloat32) return;  // exact both ways
  expect_cpu(kWhat, grads);
  const std::int64_t n = grads.numel();
  if (grads.dtype() == DType::kFloat32) {
    float* x = grads.data<float>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) x[i] = round_to(dtype, x[i]);
  } else {
    expect_dtype(kWhat, grads, grads.dtype() == DType::kFloat16);
    tensor::Float16* x = grads.data<tensor::Float16>();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      x[i] = tensor::to_float16(round_to(dtype, tensor::to_float(x[i])));
  }
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
  expect_cpu("has_inf_or_nan", x);
  const std::int64_t n = x.numel();
  bool found = false;
  switch (x.dtype()) {
    case DType::kFloat32: {
      const float* v = x.data<float>();
#pragma omp parallel for schedule(static) reduction(|| : found)
      for (std::int64_t i = 0; i < n; ++i) found = found || !std::isfinite(v[i]);
      break;
    }
    case DType::kFloat16: {
      const tensor::Float16* v = x.data<tensor::Float16>();
#pragma omp parallel for schedule(static) reduction(|| : found)
      for (std::int64_t i = 0; i < n; ++i) found = found || (v[i].bits & 0x7C00u) == 0x7C00u;
      break;
    }
    case DType::kBFloat16: {
      const tensor::BFloat16* v = x.data<tensor::BFloat16>();
#pragma omp parallel for schedule(static) reduction(|| : found)
      for (std::int64_t i = 0; i < n; ++i) found = found || (v[i].bits & 0x7F80u) == 0x7F80u;
      break;
    }
    default:
      expect_dtype("has_inf_or_nan", x, false);
  }
  return found;
}

}  // namespace mds::train
