#include "ops/elementwise.h"

#include "base/error.h"
#include "ops/activation_dtype.h"
#include "ops/check.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/widened.h"
#include "ops/cuda/backend.h"

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

void add(const DeviceContext& ctx, Tensor out, Tensor a, Tensor b) {
  constexpr const char* kOp = "add";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"a", a}, {"b", b}});
  const DType dtype = detail::activation_dtype(kOp, {"a", a}, {{"b", b}, {"out", out}});
  for (const detail::Arg arg : {detail::Arg{"a", a}, {"b", b}}) {
    detail::expect_shape(kOp, arg, out.shape());
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::add(ctx, out.raw(), a.raw(), b.raw(), dtype, out.numel());
    return;
  }
  const cpu::Fp32View vout(out, false), va(a), vb(b);
  cpu::add(vout.data(), va.data(), vb.data(), out.numel());
  vout.store();
}

void scale(const DeviceContext& ctx, Tensor out, Tensor x, float factor) {
  constexpr const char* kOp = "scale";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}});
  const DType dtype = detail::activation_dtype(kOp, {"x", x}, {{"out", out}});
  detail::expect_shape(kOp, {"x", x}, out.shape());
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::scale(ctx, out.raw(), x.raw(), factor, dtype, out.numel());
    return;
  }
  const cpu::Fp32View vout(out, false), vx(x);
  cpu::scale(vout.data(), vx.data(), factor, out.numel());
  vout.store();
}

void fill(const DeviceContext& ctx, Tensor out, float value) {
  constexpr const char* kOp = "fill";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}});
  expect_half_or_float(kOp, {"out", out});
  if (on_device) {
    if constexpr (detail::kCudaBuilt) cuda::fill(ctx, out.raw(), out.dtype(), value, out.numel());
    return;
  }
  cpu::fill(out.raw(), out.dtype(), value, out.numel());
}

void cast(const DeviceContext& ctx, Tensor out, Tensor x) {
  constexpr const char* kOp = "cast";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}});
  expect_half_or_float(kOp, {"out", out});
  expect_half_or_float(kOp, {"x", x});
  detail::expect_numel(kOp, {"out", out}, x.numel());
  if (on_device) {
    if constexpr (detail::kCudaBuilt)
      cuda::cast(ctx, out.raw(), out.dtype(), x.raw(), x.dtype(), x.numel());
    return;
  }
  cpu::cast(out.raw(), out.dtype(), x.raw(), x.dtype(), x.numel());
}

void cast_pieces(const DeviceContext& ctx, Tensor out, Tensor x,
                 std::span<const CastPiece> pieces) {
  constexpr const char* kOp = "cast_pieces";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}});
  expect_half_or_float(kOp, {"out", out});
  expect_half_or_float(kOp, {"x", x});
  for (const CastPiece& piece : pieces) {
    if (piece.numel < 0 || piece.out < 0 || piece.in < 0 || piece.out + piece.numel > out.numel() ||
        piece.in + piece.numel > x.numel()) {
      base::fail("ops::", kOp, ": piece [", piece.in, ", +", piece.numel, ") -> [", piece.out,
                 ", +", piece.numel, ") is outside x (", x.numel(), " elements) or out (",
                 out.numel(), ")");
    }
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::cast_pieces(ctx, out.raw(), out.dtype(), x.raw(), x.dtype(), pieces);
    }
    return;
  }
  const std::size_t out_size = tensor::dtype_size(out.dtype()),
                    x_size = tensor::dtype_size(x.dtype());
  for (const CastPiece& piece : pieces) {
    cpu::cast(static_cast<char*>(out.raw()) + piece.out * static_cast<std::int64_t>(out_size),
              out.dtype(),
              static_cast<const char*>(x.raw()) + piece.in * static_cast<std::int64_t>(x_size),
              x.dtype(), piece.numel);
  }
}

void add(Tensor out, Tensor a, Tensor b) {
  add(DeviceContext{}, out, a, b);
}

void scale(Tensor out, Tensor x, float factor) {
  scale(DeviceContext{}, out, x, factor);
}

void fill(Tensor out, float value) {
  fill(DeviceContext{}, out, value);
}

void cast(Tensor out, Tensor x) {
  cast(DeviceContext{}, out, x);
}

}  // namespace mds::ops
