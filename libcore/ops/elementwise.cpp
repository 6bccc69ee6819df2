#include "ops/elementwise.h"

#include "base/error.h"
#include "ops/check.h"
#include "ops/cpu/elementwise.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

namespace {

void expect_half_or_float(const char* op, detail::Arg arg) {
  const DType d = arg.tensor.dtype();
  if (d != DType::kFloat32 && d != DType::kBFloat16 && d != DType::kFloat16) {
    base::fail("ops::", op, ": ", arg.name, " must be float32, bfloat16 or float16, got ",
               tensor::dtype_name(d));
  }
}

}  // namespace

void add(Tensor out, Tensor a, Tensor b) {
  constexpr const char* kOp = "add";
  detail::require_cpu(kOp, {{"out", out}, {"a", a}, {"b", b}});
  for (const detail::Arg arg : {detail::Arg{"out", out}, {"a", a}, {"b", b}}) {
    detail::expect_dtype(kOp, arg, DType::kFloat32);
    detail::expect_shape(kOp, arg, out.shape());
  }
  cpu::add(out.data<float>(), a.data<float>(), b.data<float>(), out.numel());
}

void scale(Tensor out, Tensor x, float factor) {
  constexpr const char* kOp = "scale";
  detail::require_cpu(kOp, {{"out", out}, {"x", x}});
  for (const detail::Arg arg : {detail::Arg{"out", out}, {"x", x}}) {
    detail::expect_dtype(kOp, arg, DType::kFloat32);
    detail::expect_shape(kOp, arg, out.shape());
  }
  cpu::scale(out.data<float>(), x.data<float>(), factor, out.numel());
}

void fill(Tensor out, float value) {
  constexpr const char* kOp = "fill";
  detail::require_cpu(kOp, {{"out", out}});
  expect_half_or_float(kOp, {"out", out});
  cpu::fill(out.raw(), out.dtype(), value, out.numel());
}

void cast(Tensor out, Tensor x) {
  constexpr const char* kOp = "cast";
  detail::require_cpu(kOp, {{"out", out}, {"x", x}});
  expect_half_or_float(kOp, {"out", out});
  expect_half_or_float(kOp, {"x", x});
  detail::expect_numel(kOp, {"out", out}, x.numel());
  cpu::cast(out.raw(), out.dtype(), x.raw(), x.dtype(), x.numel());
}

}  // namespace mds::ops
