#include "ops/gradients.h"

#include "base/error.h"
#include "ops/check.h"
#include "ops/cpu/gradients.h"
#include "ops/cuda/backend.h"

namespace mds::ops {
namespace {

using tensor::DType;
using tensor::Tensor;

bool is_float_or_half(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

void expect(const char* op, const detail::Arg& arg, bool ok, const char* allowed) {
  if (!ok) {
    base::fail("ops::", op, ": ", arg.name, " must be ", allowed, ", got ",
               tensor::dtype_name(arg.tensor.dtype()));
  }
}

void expect_rounding_dtype(const char* op, const char* role, DType dtype) {
  if (!is_float_or_half(dtype))
    base::fail("ops::", op, ": ", role, " must be fp32, bf16 or fp16, got ",
               tensor::dtype_name(dtype));
}

void scale_or_divide(const char* op, const DeviceContext& ctx, Tensor x, float operand,
                     bool divide) {
  const bool on_device = detail::on_cuda(op, ctx, {{"x", x}});
  expect(op, {"x", x}, is_float_or_half(x.dtype()), "fp32, bf16 or fp16");
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::scale_in_dtype(ctx, x.raw(), x.dtype(), x.numel(), operand, divide);
    return;
  }
  cpu::scale_in_dtype(x.raw(), x.dtype(), x.numel(), operand, divide);
}

}  // namespace

void accumulate_rounded(const DeviceContext& ctx, Tensor accumulator, Tensor micro,
                        DType grad_dtype, AccumulateSteps steps) {
  constexpr const char* kOp = "accumulate_rounded";
  const bool on_device =
      detail::on_cuda(kOp, ctx, {{"accumulator", accumulator}, {"micro", micro}});
  const DType acc = accumulator.dtype();
  expect(kOp, {"accumulator", accumulator}, acc == DType::kFloat32 || acc == DType::kFloat16,
         "fp32 or fp16");
  detail::expect_dtype(kOp, {"micro", micro}, DType::kFloat32);
  detail::expect_numel(kOp, {"micro", micro}, accumulator.numel());
  expect_rounding_dtype(kOp, "the gradient dtype", grad_dtype);
  expect_rounding_dtype(kOp, "the dtype rounded through", steps.round_through);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::accumulate_rounded(ctx, accumulator.raw(), acc, micro.data<float>(), micro.numel(),
                               grad_dtype, steps.fresh, steps.round_through);
    }
    return;
  }
  cpu::accumulate_rounded(accumulator.raw(), acc, micro.data<float>(), micro.numel(), grad_dtype,
                          steps.fresh, steps.round_through);
}

void round_through(const DeviceContext& ctx, Tensor x, DType dtype) {
  constexpr const char* kOp = "round_through";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"x", x}});
  expect(kOp, {"x", x}, x.dtype() == DType::kFloat32 || x.dtype() == DType::kFloat16,
         "fp32 or fp16");
  expect_rounding_dtype(kOp, "the rounding dtype", dtype);
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::round_through(ctx, x.raw(), x.dtype(), x.numel(), dtype);
    return;
  }
  cpu::round_through(x.raw(), x.dtype(), x.numel(), dtype);
}

void scale_in_dtype(const DeviceContext& ctx, Tensor x, float factor) {
  scale_or_divide("scale_in_dtype", ctx, x, factor, false);
}

void divide_in_dtype(const DeviceContext& ctx, Tensor x, float divisor) {
  scale_or_divide("divide_in_dtype", ctx, x, divisor, true);
}

bool has_inf_or_nan(const DeviceContext& ctx, Tensor x) {
  constexpr const char* kOp = "has_inf_or_nan";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"x", x}});
  expect(kOp, {"x", x}, is_float_or_half(x.dtype()), "fp32, bf16 or fp16");
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      return cuda::has_inf_or_nan(ctx, x.raw(), x.dtype(), x.numel());
  }
  return cpu::has_inf_or_nan(x.raw(), x.dtype(), x.numel());
}

std::vector<double> sums_of_squares(const DeviceContext& ctx, Tensor x,
                                    std::span<const SquaresSegment> segments) {
  constexpr const char* kOp = "sums_of_squares";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"x", x}});
  expect(kOp, {"x", x}, is_float_or_half(x.dtype()), "fp32, bf16 or fp16");
  for (const SquaresSegment& segment : segments) {
    if (segment.offset < 0 || segment.numel < 0 || segment.offset + segment.numel > x.numel()) {
      base::fail("ops::", kOp, ": segment [", segment.offset, ", ", segment.offset + segment.numel,
                 ") is outside x's ", x.numel(), " elements");
    }
  }
  std::vector<double> sums(segments.size(), 0.0);
  const auto count = static_cast<std::int64_t>(segments.size());
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::sums_of_squares(ctx, sums.data(), x.raw(), x.dtype(), segments.data(), count);
    return sums;
  }
  cpu::sums_of_squares(sums.data(), x.raw(), x.dtype(), segments.data(), count);
  return sums;
}

}  // namespace mds::ops
