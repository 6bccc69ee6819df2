#include "ops/dropout.h"

#include "base/error.h"
#include "ops/activation_dtype.h"
#include "ops/check.h"
#include "ops/cpu/dropout.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/widened.h"
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

// The bias's (or dbias's) shape [h] against x's last dimension; returns x's row count. Dtypes are
// the caller's checks.
std::int64_t check_bias(const char* op, const char* name, const Tensor& bias, const Tensor& x) {
  if (bias.shape().rank() != 1) {
    base::fail("ops::", op, ": ", name, " must be [h], got ", bias.shape().to_string());
  }
  return detail::rows_with_last_dim(op, {"x", x}, bias.dim(0));
}

}  // namespace

bool dropout_keep(const DropoutStream& stream, std::uint64_t index) {
  const PhiloxCounter words = philox_block(stream.seed, stream.offset, index / 4);
  return philox_uniform(words[index % 4]) >= stream.p;
}

bool attention_dropout_keep(const DropoutStream& stream, std::uint64_t index) {
  const PhiloxCounter words = philox_block(stream.seed, stream.offset, index / 8);
  return philox_uniform16(philox_half(words, index)) >= stream.p;
}

void dropout_forward(const DeviceContext& ctx, Tensor out, Tensor x, const DropoutStream& stream) {
  constexpr const char* kOp = "dropout_forward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}});
  check_p(kOp, stream);
  const DType dtype = detail::activation_dtype(kOp, {"x", x}, {{"out", out}});
  detail::expect_shape(kOp, {"out", out}, x.shape());
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::dropout_forward(ctx, out.raw(), x.raw(), nullptr, nullptr, dtype, DType::kFloat32,
                            x.numel(), 1, stream);
    }
    return;
  }
  const cpu::Fp32View vout(out, false), vx(x);
  cpu::dropout_forward(vout.data(), vx.data(), nullptr, nullptr, x.numel(), 1, stream);
  vout.store();
}

void dropout_backward(const DeviceContext& ctx, Tensor dx, Tensor dout,
                      const DropoutStream& stream) {
  constexpr const char* kOp = "dropout_backward";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"dx", dx}, {"dout", dout}});
  check_p(kOp, stream);
  const DType dtype = detail::activation_dtype(kOp, {"dout", dout}, {{"dx", dx}});
  detail::expect_shape(kOp, {"dx", dx}, dout.shape());
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::dropout_backward(ctx, dx.raw(), dout.raw(), dtype, dout.numel(), stream, false);
    return;
  }
  const cpu::Fp32View vdx(dx, false), vdout(dout);
  cpu::dropout_backward(vdx.data(), vdout.data(), dout.numel(), stream, false);
  vdx.store();
}

void bias_dropout_add_forward(const DeviceContext& ctx, Tensor out, Tensor x, Tensor bias,
                              Tensor residual, const DropoutStream& stream) {
  constexpr const char* kOp = "bias_dropout_add_forward";
  const bool on_device =
      detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}, {"bias", bias}, {"residual", residual}});
  check_p(kOp, stream);
  const DType dtype =
      detail::activation_dtype(kOp, {"x", x}, {{"out", out}, {"residual", residual}});
  const DType bias_dtype = detail::parameter_dtype(kOp, {"x", x}, {"bias", bias}, {});
  check_bias(kOp, "bias", bias, x);
  detail::expect_shape(kOp, {"out", out}, x.shape());
  detail::expect_shape(kOp, {"residual", residual}, x.shape());
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::dropout_forward(ctx, out.raw(), x.raw(), bias.raw(), residual.raw(), dtype, bias_dtype,
                            x.numel(), bias.dim(0), stream);
    }
    return;
  }
  const cpu::Fp32View vout(out, false), vx(x), vbias(bias), vresidual(residual);
  cpu::dropout_forward(vout.data(), vx.data(), vbias.data(), vresidual.data(), x.numel(),
                       bias.dim(0), stream);
  vout.store();
}

void bias_dropout_add_backward(const DeviceContext& ctx, Tensor dx, Tensor dbias, Tensor dresidual,
                               Tensor dout, const DropoutStream& stream, Dx dx_mode) {
  constexpr const char* kOp = "bias_dropout_add_backward";
  const bool on_device = detail::on_cuda(
      kOp, ctx, {{"dx", dx}, {"dbias", dbias}, {"dresidual", dresidual}, {"dout", dout}});
  check_p(kOp, stream);
  const DType dtype =
      detail::activation_dtype(kOp, {"dout", dout}, {{"dx", dx}, {"dresidual", dresidual}});
  detail::expect_shape(kOp, {"dx", dx}, dout.shape());
  const bool has_bias = detail::given(dbias), has_residual = detail::given(dresidual);
  if (has_bias) detail::expect_dtype(kOp, {"dbias", dbias}, DType::kFloat32);
  const std::int64_t rows = has_bias ? check_bias(kOp, "dbias", dbias, dout) : 0;
  if (has_residual) detail::expect_shape(kOp, {"dresidual", dresidual}, dout.shape());
  // The same three steps on either device: dbias from dout, dresidual += dout, then dx (which
  // may be dout's memory for the caller's next step, so it comes last). On a device they are one
  // pass where the rows allow.
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      const bool accumulate = dx_mode == Dx::kAccumulate;
      if (has_bias &&
          cuda::bias_dropout_add_backward(ctx, dx.raw(), dbias.data<float>(),
                                          has_residual ? dresidual.raw() : nullptr, dout.raw(),
                                          dtype, rows, dbias.dim(0), stream, accumulate)) {
        return;
      }
      if (has_bias) {
        cuda::dropout_bias_grad(ctx, dbias.data<float>(), dout.raw(), dtype, rows, dbias.dim(0),
                                stream);
      }
      if (has_residual) {
        cuda::add(ctx, dresidual.raw(), dresidual.raw(), dout.raw(), dtype, dout.numel());
      }
      cuda::dropout_backward(ctx, dx.raw(), dout.raw(), dtype, dout.numel(), stream, accumulate);
    }
    return;
  }
  const cpu::Fp32View vdx(dx), vdresidual(dresidual), vdout(dout);
  if (has_bias) {
    cpu::dropout_bias_grad(dbias.data<float>(), vdout.data(), rows, dbias.dim(0), stream);
  }
  if (has_residual) cpu::add(vdresidual.data(), vdresidual.data(), vdout.data(), dout.numel());
  const bool accumulate = dx_mode == Dx::kAccumulate;
  cpu::dropout_backward(vdx.data(), vdout.data(), dout.numel(), stream, accumulate);
  if (!accumulate) {
    // The bits of adding onto zeros, which this mode replaces (0 + −0 = +0); dx may be dout's
    // memory, so no fill beforehand.
    float* values = vdx.data();
    for (std::int64_t i = 0; i < dout.numel(); ++i) values[i] += 0.0f;
  }
  vdresidual.store();
  vdx.store();
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
