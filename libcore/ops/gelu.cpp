#include "ops/gelu.h"

#include "base/error.h"
#include "ops/check.h"
#include "ops/cpu/gelu.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

void gelu_forward(const DeviceContext& ctx, Tensor out, Tensor x, GeluKind kind) {
  constexpr const char* kOp = "gelu_forward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}});
  detail::expect_dtype(kOp, {"x", x}, DType::kFloat32);
  detail::expect_dtype(kOp, {"out", out}, DType::kFloat32);
  detail::expect_shape(kOp, {"out", out}, x.shape());
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::gelu_forward(ctx, out.data<float>(), x.data<float>(), x.numel(), kind);
    return;
  }
  cpu::gelu_forward(out.data<float>(), x.data<float>(), x.numel(), kind);
}

void gelu_backward(const DeviceContext& ctx, Tensor dx, Tensor dout, Tensor x, GeluKind kind) {
  constexpr const char* kOp = "gelu_backward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"dx", dx}, {"dout", dout}, {"x", x}});
  for (const detail::Arg arg : {detail::Arg{"dx", dx}, {"dout", dout}, {"x", x}}) {
    detail::expect_dtype(kOp, arg, DType::kFloat32);
    detail::expect_shape(kOp, arg, x.shape());
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::gelu_backward(ctx, dx.data<float>(), dout.data<float>(), x.data<float>(), x.numel(),
                          kind);
    }
    return;
  }
  cpu::gelu_backward(dx.data<float>(), dout.data<float>(), x.data<float>(), x.numel(), kind);
}

void bias_gelu_forward(const DeviceContext& ctx, Tensor out, Tensor x, Tensor bias, GeluKind kind) {
  constexpr const char* kOp = "bias_gelu_forward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}, {"bias", bias}});
  if (bias.shape().rank() != 1) {
    base::fail("ops::", kOp, ": bias must be [F], got ", bias.shape().to_string());
  }
  const std::int64_t rows = detail::rows_with_last_dim(kOp, {"x", x}, bias.dim(0));
  for (const detail::Arg arg : {detail::Arg{"out", out}, {"x", x}, {"bias", bias}}) {
    detail::expect_dtype(kOp, arg, DType::kFloat32);
  }
  detail::expect_shape(kOp, {"out", out}, x.shape());
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::bias_gelu_forward(ctx, out.data<float>(), x.data<float>(), bias.data<float>(), rows,
                              bias.dim(0), kind);
    }
    return;
  }
  cpu::bias_gelu_forward(out.data<float>(), x.data<float>(), bias.data<float>(), rows, bias.dim(0),
                         kind);
}

void bias_gelu_backward(const DeviceContext& ctx, Tensor dx, Tensor dbias, Tensor dout, Tensor x,
                        Tensor bias, GeluKind kind) {
  constexpr const char* kOp = "bias_gelu_backward";
  const bool on_device = detail::on_cuda(
      kOp, ctx, {{"dx", dx}, {"dbias", dbias}, {"dout", dout}, {"x", x}, {"bias", bias}});
  if (bias.shape().rank() != 1) {
    base::fail("ops::", kOp, ": bias must be [F], got ", bias.shape().to_string());
  }
  const std::int64_t rows = detail::rows_with_last_dim(kOp, {"x", x}, bias.dim(0));
  for (const detail::Arg arg : {detail::Arg{"dx", dx}, {"dout", dout}, {"x", x}, {"bias", bias}}) {
    detail::expect_dtype(kOp, arg, DType::kFloat32);
  }
  detail::expect_shape(kOp, {"dx", dx}, x.shape());
  detail::expect_shape(kOp, {"dout", dout}, x.shape());
  float* dbias_ptr = nullptr;
  if (detail::given(dbias)) {
    detail::expect_shape(kOp, {"dbias", dbias}, bias.shape());
    dbias_ptr = dbias.data<float>();
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::bias_gelu_backward(ctx, dx.data<float>(), dbias_ptr, dout.data<float>(),
                               x.data<float>(), bias.data<float>(), rows, bias.dim(0), kind);
    }
    return;
  }
  cpu::bias_gelu_backward(dx.data<float>(), dbias_ptr, dout.data<float>(), x.data<float>(),
                          bias.data<float>(), rows, bias.dim(0), kind);
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
