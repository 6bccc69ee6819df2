// Dropout with masks from Philox-4x32-10 (ops/philox.h): element i of a tensor is kept iff
// philox_uniform(word i) >= p for stream (seed, offset), and kept values are scaled by 1/(1 − p).
// The caller derives `offset` from (layer, step, micro-batch, TP region) so that every call site
// draws a distinct stream; the backward recomputes the same mask from the same (seed, offset).
// p must lie in [0, 1); p = 0 copies. The CUDA kernels draw the same masks, bit for bit.
// Each op takes the DeviceContext it runs with (ops/device_context.h) and has an overload without
// one for host tensors.
#pragma once
#include <cstdint>

#include "ops/device_context.h"
#include "ops/dx_mode.h"
#include "tensor/tensor.h"

namespace mds::ops {

struct DropoutStream {
  float p = 0.0f;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
};

// Whether element `index` of the stream survives (the mask, for tests and other backends).
bool dropout_keep(const DropoutStream& stream, std::uint64_t index);

// The attention dropout's masks (ops/attention.h; the kernels' attention_detail::Dropout) draw
// 16 bits an element instead: element `index` is kept iff philox_uniform16(philox_half(block
// index / 8, index)) >= p, so a Philox block serves eight elements. The probabilities matrix has
// s² elements a head where the hidden dropouts have s·h, and on a GPU its draws are bound by
// Philox's integer work; 16 bits place p on a 2^-16 grid (the kept share is 1 − ⌈p·2^16⌉/2^16:
// 0.899994 for p = 0.1), where FlashAttention's draws use 8.
bool attention_dropout_keep(const DropoutStream& stream, std::uint64_t index);

// Activations (out, x, residual; dx, dout, dresidual) are fp32, bf16 or fp16, all of one dtype: a
// 16-bit call widens its loads, computes as fp32 (the same masks) and rounds each output once.
// bias is fp32 or the activations' dtype (widened exactly: a 16-bit bias gives what its fp32
// widening gives, bit for bit); dbias is fp32.

// out = x ⊙ mask / (1 − p) (equal shapes; out may alias x).
void dropout_forward(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor x,
                     const DropoutStream& stream);
// dx = dout ⊙ mask / (1 − p). Writes (does not add) so that it can run in place (dx = dout).
void dropout_backward(const DeviceContext& ctx, tensor::Tensor dx, tensor::Tensor dout,
                      const DropoutStream& stream);

// Megatron's bias-dropout-add (training.md §1.3.4): out[..., h] = residual + dropout(x + bias[h]).
void bias_dropout_add_forward(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor x,
                              tensor::Tensor bias, tensor::Tensor residual,
                              const DropoutStream& stream);
// dx += dout ⊙ mask / (1 − p) (dx = … with Dx::kOverwrite); dbias[h] += Σ_rows of that;
// dresidual += dout. dresidual may be tensor::Tensor{} when the caller lets dout itself carry the
// residual gradient (the usual case in the residual stream); dbias may be {} too.
void bias_dropout_add_backward(const DeviceContext& ctx, tensor::Tensor dx, tensor::Tensor dbias,
                               tensor::Tensor dresidual, tensor::Tensor dout,
                               const DropoutStream& stream, Dx dx_mode = Dx::kAccumulate);

// The same on host tensors.
void dropout_forward(tensor::Tensor out, tensor::Tensor x, const DropoutStream& stream);
void dropout_backward(tensor::Tensor dx, tensor::Tensor dout, const DropoutStream& stream);
void bias_dropout_add_forward(tensor::Tensor out, tensor::Tensor x, tensor::Tensor bias,
                              tensor::Tensor residual, const DropoutStream& stream);
void bias_dropout_add_backward(tensor::Tensor dx, tensor::Tensor dbias, tensor::Tensor dresidual,
                               tensor::Tensor dout, const DropoutStream& stream);

}  // namespace mds::ops
