#include "ops/elementwise.h"

#include <algorithm>
#include <vector>

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

void cast_pieces(const DeviceContext& ctx, Tensor out, Tensor x, std::span<const CastPiece> pieces,
                 float factor) {
  constexpr const char* kOp = "cast_pieces";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}});
  expect_half_or_float(kOp, {"out", out});
  expect_half_or_float(kOp, {"x", x});
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const CastPiece& p = pieces[k];
    const auto check = [&](const char* side, std::int64_t first, std::int64_t numel) {
      if (p.numel < 0 || first < 0 || first + p.numel > numel) {
        base::fail("ops::", kOp, ": piece ", k, " reads or writes [", first, ", ", first + p.numel,
                   ") of ", side, ", which has ", numel, " elements");
      }
    };
    check("x", p.in, x.numel());
    check("out", p.out, out.numel());
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::cast_pieces(ctx, out.raw(), out.dtype(), x.raw(), x.dtype(), pieces, factor);
    }
    return;
  }
  const auto out_size = static_cast<std::int64_t>(tensor::dtype_size(out.dtype()));
  const auto x_size = static_cast<std::int64_t>(tensor::dtype_size(x.dtype()));
  for (const CastPiece& piece : pieces) {
    char* to = static_cast<char*>(out.raw()) + piece.out * out_size;
    const char* from = static_cast<const char*>(x.raw()) + piece.in * x_size;
    if (factor == 1.0f) {
      cpu::cast(to, out.dtype(), from, x.dtype(), piece.numel);
      continue;
    }
    // Widened, multiplied in fp32, rounded once: through a bounded fp32 buffer.
    constexpr std::int64_t kBlock = 1 << 16;
    std::vector<float> wide(static_cast<std::size_t>(std::min(piece.numel, kBlock)));
    for (std::int64_t at = 0; at < piece.numel; at += kBlock) {
      const std::int64_t n = std::min(kBlock, piece.numel - at);
      cpu::cast(wide.data(), DType::kFloat32, from + at * x_size, x.dtype(), n);
      cpu::scale(wide.data(), wide.data(), factor, n);
      cpu::cast(to + at * out_size, out.dtype(), wide.data(), DType::kFloat32, n);
    }
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
