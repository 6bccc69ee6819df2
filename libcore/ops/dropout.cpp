#include "ops/dropout.h"

#include "base/error.h"
#include "ops/check.h"
#include "ops/cpu/dropout.h"
#include "ops/cpu/elementwise.h"
#include "ops/cuda/backend.h"
#include "ops/philox.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

namespace {

void check_p(const char* op, const DropoutStream& stream) {
  if (!(stream.p >= 0.0f && stream.p < 1.0f)) {
    base::fail("ops::", op, ": dropout probability must be in [0, 1), got ", stream.p);
  }
}

void check_like(const char* op, detail::Arg arg, const Tensor& like) {
  detail::expect_dtype(op, arg, DType::kFloat32);
  detail::expect_shape(op, arg, like.shape());
}

std::int64_t check_bias(const char* op, const Tensor& bias, const Tensor& x) {
  detail::expect_dtype(op, {"bias", bias}, DType::kFloat32);
  if (bias.shape().rank() != 1) {
    base::fail("ops::", op, ": bias must be [h], got ", bias.shape().to_string());
  }
  return detail::rows_with_last_dim(op, {"x", x}, bias.dim(0));
}

}  // namespace

bool dropout_keep(const DropoutStream& stream, std::uint64_t index) {
  const PhiloxCounter words = philox_block(stream.seed, stream.offset, index / 4);
  return philox_uniform(words[index % 4]) >= stream.p;
}

void dropout_forward(const DeviceContext& ctx, Tensor out, Tensor x, const DropoutStream& stream) {
  constexpr const char* kOp = "dropout_forward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}});
  check_p(kOp, stream);
  check_like(kOp, {"x", x}, x);
  check_like(kOp, {"out", out}, x);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::dropout_forward(ctx, out.data<float>(), x.data<float>(), nullptr, nullptr, x.numel(), 1,
                            stream);
    }
    return;
  }
  cpu::dropout_forward(out.data<float>(), x.data<float>(), nullptr, nullptr, x.numel(), 1, stream);
}

void dropout_backward(const DeviceContext& ctx, Tensor dx, Tensor dout,
                      const DropoutStream& stream) {
  constexpr const char* kOp = "dropout_backward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"dx", dx}, {"dout", dout}});
  check_p(kOp, stream);
  check_like(kOp, {"dout", dout}, dout);
  check_like(kOp, {"dx", dx}, dout);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::dropout_backward(ctx, dx.data<float>(), dout.data<float>(), dout.numel(), stream,
                             false);
    }
    return;
  }
  cpu::dropout_backward(dx.data<float>(), dout.data<float>(), dout.numel(), stream, false);
}

void bias_dropout_add_forward(const DeviceContext& ctx, Tensor out, Tensor x, Tensor bias,
                              Tensor residual, const DropoutStream& stream) {
  constexpr const char* kOp = "bias_dropout_add_forward";
  const bool on_device =
      detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}, {"bias", bias}, {"residual", residual}});
  check_p(kOp, stream);
  check_bias(kOp, bias, x);
  check_like(kOp, {"x", x}, x);
  check_like(kOp, {"out", out}, x);
  check_like(kOp, {"residual", residual}, x);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::dropout_forward(ctx, out.data<float>(), x.data<float>(), bias.data<float>(),
                            residual.data<float>(), x.numel(), bias.dim(0), stream);
    }
    return;
  }
  cpu::dropout_forward(out.data<float>(), x.data<float>(), bias.data<float>(),
                       residual.data<float>(), x.numel(), bias.dim(0), stream);
}

void bias_dropout_add_backward(const DeviceContext& ctx, Tensor dx, Tensor dbias, Tensor dresidual,
                               Tensor dout, const DropoutStream& stream) {
  constexpr const char* kOp = "bias_dropout_add_backward";
  const bool on_device = detail::on_cuda(
      kOp, ctx, {{"dx", dx}, {"dbias", dbias}, {"dresidual", dresidual}, {"dout", dout}});
  check_p(kOp, stream);
  check_like(kOp, {"dout", dout}, dout);
  check_like(kOp, {"dx", dx}, dout);
  const bool has_bias = detail::given(dbias), has_residual = detail::given(dresidual);
  const std::int64_t rows = has_bias ? check_bias(kOp, dbias, dout) : 0;
  if (has_residual) check_like(kOp, {"dresidual", dresidual}, dout);
  // The same three steps on either device: dbias from dout, dresidual += dout, then dx (which
  // may be dout's memory for the caller's next step, so it comes last).
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      if (has_bias) {
        cuda::dropout_bias_grad(ctx, dbias.data<float>(), dout.data<float>(), rows, dbias.dim(0),
                                stream);
      }
      if (has_residual) {
        cuda::add(ctx, dresidual.data<float>(), dresidual.data<float>(), dout.data<float>(),
                  dout.numel());
      }
      cuda::dropout_backward(ctx, dx.data<float>(), dout.data<float>(), dout.numel(), stream, true);
    }
    return;
  }
  if (has_bias) {
    cpu::dropout_bias_grad(dbias.data<float>(), dout.data<float>(), rows, dbias.dim(0), stream);
  }
  if (has_residual) {
    cpu::add(dresidual.data<float>(), dresidual.data<float>(), dout.data<float>(), dout.numel());
  }
  cpu::dropout_backward(dx.data<float>(), dout.data<float>(), dout.numel(), stream, true);
}

void dropout_forward(Tensor out, Tensor x, const DropoutStream& stream) {
  dropout_forward(DeviceContext{}, out, x, stream);
}

void dropout_backward(Tensor dx, Tensor dout, const DropoutStream& stream) {
  dropout_backward(DeviceContext{}, dx, dout, stream);
}

void bias_dropout_add_forward(Tensor out, Tensor x, Tensor bias, Tensor residual,
                              const DropoutStream& stream) {
  bias_dropout_add_forward(DeviceContext{}, out, x, bias, residual, stream);
}

void bias_dropout_add_backward(Tensor dx, Tensor dbias, Tensor dresidual, Tensor dout,
                               const DropoutStream& stream) {
  bias_dropout_add_backward(DeviceContext{}, dx, dbias, dresidual, dout, stream);
}

}  // namespace mds::ops
