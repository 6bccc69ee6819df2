#include "ops/gelu.h"

#include <algorithm>

#include "base/error.h"
#include "ops/activation_dtype.h"
#include "ops/check.h"
#include "ops/cpu/gelu.h"
#include "ops/cpu/widened.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

void gelu_forward(const DeviceContext& ctx, Tensor out, Tensor x, GeluKind kind) {
  constexpr const char* kOp = "gelu_forward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}});
  const DType dtype = detail::activation_dtype(kOp, {"x", x}, {{"out", out}});
  detail::expect_shape(kOp, {"out", out}, x.shape());
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::gelu_forward(ctx, out.raw(), x.raw(), dtype, x.numel(), kind);
    return;
  }
  const cpu::Fp32View vout(out, false), vx(x);
  cpu::gelu_forward(vout.data(), vx.data(), x.numel(), kind);
  vout.store();
}

void gelu_backward(const DeviceContext& ctx, Tensor dx, Tensor dout, Tensor x, GeluKind kind) {
  constexpr const char* kOp = "gelu_backward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"dx", dx}, {"dout", dout}, {"x", x}});
  const DType dtype = detail::activation_dtype(kOp, {"x", x}, {{"dx", dx}, {"dout", dout}});
  for (const detail::Arg arg : {detail::Arg{"dx", dx}, {"dout", dout}}) {
    detail::expect_shape(kOp, arg, x.shape());
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::gelu_backward(ctx, dx.raw(), dout.raw(), x.raw(), dtype, x.numel(), kind);
    return;
  }
  const cpu::Fp32View vdx(dx), vdout(dout), vx(x);
  cpu::gelu_backward(vdx.data(), vdout.data(), vx.data(), x.numel(), kind);
  vdx.store();
}

void bias_gelu_forward(const DeviceContext& ctx, Tensor out, Tensor x, Tensor bias, GeluKind kind) {
  constexpr const char* kOp = "bias_gelu_forward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}, {"bias", bias}});
  if (bias.shape().rank() != 1) {
    base::fail("ops::", kOp, ": bias must be [F], got ", bias.shape().to_string());
  }
  const std::int64_t rows = detail::rows_with_last_dim(kOp, {"x", x}, bias.dim(0));
  const DType dtype = detail::activation_dtype(kOp, {"x", x}, {{"out", out}});
  const DType bias_dtype = detail::parameter_dtype(kOp, {"x", x}, {"bias", bias}, {});
  detail::expect_shape(kOp, {"out", out}, x.shape());
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::bias_gelu_forward(ctx, out.raw(), x.raw(), bias.raw(), dtype, bias_dtype, rows,
                              bias.dim(0), kind);
    }
    return;
  }
  const cpu::Fp32View vout(out, false), vx(x), vbias(bias);
  cpu::bias_gelu_forward(vout.data(), vx.data(), vbias.data(), rows, bias.dim(0), kind);
  vout.store();
}

void bias_gelu_backward(const DeviceContext& ctx, Tensor dx, Tensor dbias, Tensor dout, Tensor x,
                        Tensor bias, GeluKind kind, Dx dx_mode) {
  constexpr const char* kOp = "bias_gelu_backward";
  const bool on_device = detail::on_cuda(
      kOp, ctx, {{"dx", dx}, {"dbias", dbias}, {"dout", dout}, {"x", x}, {"bias", bias}});
  const bool has_bias = detail::given(bias);
  if (has_bias && bias.shape().rank() != 1) {
    base::fail("ops::", kOp, ": bias must be [F], got ", bias.shape().to_string());
  }
  const tensor::Shape& x_shape = x.shape();
  const std::int64_t cols =
      has_bias ? bias.dim(0) : (x_shape.rank() > 0 ? x_shape[x_shape.rank() - 1] : 0);
  const std::int64_t rows = detail::rows_with_last_dim(kOp, {"x", x}, cols);
  const DType dtype = detail::activation_dtype(kOp, {"x", x}, {{"dx", dx}, {"dout", dout}});
  const DType bias_dtype =
      has_bias ? detail::parameter_dtype(kOp, {"x", x}, {"bias", bias}, {}) : DType::kFloat32;
  detail::expect_shape(kOp, {"dx", dx}, x.shape());
  detail::expect_shape(kOp, {"dout", dout}, x.shape());
  float* dbias_ptr = nullptr;
  if (detail::given(dbias)) {
    detail::expect_dtype(kOp, {"dbias", dbias}, DType::kFloat32);
    detail::expect_shape(kOp, {"dbias", dbias}, tensor::Shape{cols});
    dbias_ptr = dbias.data<float>();
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::bias_gelu_backward(ctx, dx.raw(), dbias_ptr, dout.raw(), x.raw(), bias.raw(), dtype,
                               bias_dtype, rows, cols, kind, dx_mode == Dx::kAccumulate);
    }
    return;
  }
  const cpu::Fp32View vdx(dx), vdout(dout), vx(x), vbias(bias);
  // The host overwrites by adding onto zeros: the bits of the fill-then-accumulate it replaces.
  if (dx_mode == Dx::kOverwrite) std::fill_n(vdx.data(), dx.numel(), 0.0f);
  cpu::bias_gelu_backward(vdx.data(), dbias_ptr, vdout.data(), vx.data(), vbias.data(), rows, cols,
                          kind);
  vdx.store();
}

void gelu_forward(Tensor out, Tensor x, GeluKind kind) {
  gelu_forward(DeviceContext{}, out, x, kind);
}

void gelu_backward(Tensor dx, Tensor dout, Tensor x, GeluKind kind) {
  gelu_backward(DeviceContext{}, dx, dout, x, kind);
}

void bias_gelu_forward(Tensor out, Tensor x, Tensor bias, GeluKind kind) {
  bias_gelu_forward(DeviceContext{}, out, x, bias, kind);
}

void bias_gelu_backward(Tensor dx, Tensor dbias, Tensor dout, Tensor x, Tensor bias,
                        GeluKind kind) {
  bias_gelu_backward(DeviceContext{}, dx, dbias, dout, x, bias, kind);
}

}  // namespace mds::ops
