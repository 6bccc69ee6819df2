// Elementwise helpers of the layer code: residual add, scale, fill and precision casts.
// Outputs may alias inputs (out = a is an in-place accumulate).
//
// Every public op runs where its DeviceContext runs (ops/device_context.h): on the host, or on a
// CUDA device through kernels/, and its tensors must all be there. Each also has an overload
// without a context, for host tensors.
#pragma once

#include <cstdint>
#include <span>

#include "ops/device_context.h"
#include "tensor/tensor.h"

namespace mds::ops {

// out = a + b (equal shapes; fp32, bf16 or fp16, all three of one dtype: 16-bit inputs widened,
// the fp32 sum rounded once). The backward of a residual add is the identity: both inputs
// receive dout, which callers add with this same op.
void add(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor a, tensor::Tensor b);
// out = x · factor (fp32, bf16 or fp16, both of one dtype; the fp32 product rounded once).
void scale(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor x, float factor);
// Every element of out (fp32, bf16 or fp16) = value, rounded to out's dtype.
void fill(const DeviceContext& ctx, tensor::Tensor out, float value);
// out = x converted between fp32, bf16 and fp16 (round to nearest even, as PyTorch's .to());
// equal dtypes copy. Shapes must have equal element counts. Both on the context's device
// (tensor::copy moves data between devices).
void cast(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor x);

// One piece of cast_pieces: elements [in, in + numel) of its input to [out, out + numel) of its
// output.
struct CastPiece {
  std::int64_t out = 0;
  std::int64_t in = 0;
  std::int64_t numel = 0;
};

// cast of every piece between the flat buffers `out` and `x` (offsets in elements; the pieces
// within bounds, their outputs not overlapping each other or x). Bit-identical to one cast per
// piece; on a device one launch for all of them, where one cast a piece (a copy each for equal
// dtypes) cost a queued operation per piece (ZeRO's partitions gather a copy per parameter).
// With a factor other than 1 each element is widened, multiplied by it in fp32 and rounded once
// to out's dtype (for fp32 to fp32, the bits of scale then cast).
void cast_pieces(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor x,
                 std::span<const CastPiece> pieces, float factor = 1.0f);

// The same on host tensors.
void add(tensor::Tensor out, tensor::Tensor a, tensor::Tensor b);
void scale(tensor::Tensor out, tensor::Tensor x, float factor);
void fill(tensor::Tensor out, float value);
void cast(tensor::Tensor out, tensor::Tensor x);

}  // namespace mds::ops
