#include "kernels/elementwise.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void add(const DeviceContext& ctx, void* out, const void* a, const void* b, tensor::DType dtype,
         std::int64_t n) {
  kernels::add(out, a, b, dtype, n, stream_of(ctx));
}

void scale(const DeviceContext& ctx, void* out, const void* x, float factor, tensor::DType dtype,
           std::int64_t n) {
  kernels::scale(out, x, factor, dtype, n, stream_of(ctx));
}

void fill(const DeviceContext& ctx, void* out, tensor::DType dtype, float value, std::int64_t n) {
  kernels::fill(out, dtype, value, n, stream_of(ctx));
}

void cast(const DeviceContext& ctx, void* out, tensor::DType out_dtype, const void* x,
          tensor::DType x_dtype, std::int64_t n) {
  kernels::cast(out, out_dtype, x, x_dtype, n, stream_of(ctx));
}

void cast_pieces(const DeviceContext& ctx, void* out, tensor::DType out_dtype, const void* x,
                 tensor::DType x_dtype, std::span<const CastPiece> pieces, float factor) {
  kernels::cast_pieces(out, out_dtype, x, x_dtype, pieces, factor, stream_of(ctx),
                       &ctx.cuda().scratch);
}

}  // namespace mds::ops::cuda
