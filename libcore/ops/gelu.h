// GeLU as upstream's MLP computes it (training.md §1.5).
// Each op takes the DeviceContext it runs with (ops/device_context.h) and has an overload without
// one for host tensors.
#pragma once

#include "ops/device_context.h"
#include "ops/dx_mode.h"
#include "tensor/tensor.h"

namespace mds::ops {

enum class GeluKind {
  // Default (`--bias-gelu-fusion`): 0.5·z·(1 + tanh(0.79788456·z·(1 + 0.044715·z²))) with the
  // hand-written derivative of megatron/model/fused_bias_gelu.py.
  kTanhFused,
  // `--openai-gelu`: the same tanh form with the constant 0.7978845608028654.
  kTanhOpenAI,
  // `--no-bias-gelu-fusion`: exact 0.5·z·(1 + erf(z/√2)).
  kErf,
};

// Activations (out, x; dx, dout) are fp32, bf16 or fp16, all of x's dtype: a 16-bit call widens
// its loads, computes as fp32 and rounds each output once. bias is fp32 or x's dtype (widened
// exactly: a 16-bit bias gives what its fp32 widening gives, bit for bit); dbias is fp32.

// out = gelu(x) elementwise; any shape.
void gelu_forward(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor x,
                  GeluKind kind = GeluKind::kTanhFused);
// dx += gelu'(x)·dout.
void gelu_backward(const DeviceContext& ctx, tensor::Tensor dx, tensor::Tensor dout,
                   tensor::Tensor x, GeluKind kind = GeluKind::kTanhFused);

// The fused bias-GeLU: out[..., F] = gelu(x + bias[F]); x is the bias-free GEMM output.
void bias_gelu_forward(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor x,
                       tensor::Tensor bias, GeluKind kind = GeluKind::kTanhFused);
// With g = gelu'(x + bias)·dout: dx += g (dx = g with Dx::kOverwrite) and dbias += Σ_rows g
// (upstream returns the same g as the gradient of both inputs). dx must not alias dout. bias may
// be left empty where x already holds it (ops/gelu_epilogues.h's pre-activation): g =
// gelu'(x)·dout.
void bias_gelu_backward(const DeviceContext& ctx, tensor::Tensor dx, tensor::Tensor dbias,
                        tensor::Tensor dout, tensor::Tensor x, tensor::Tensor bias,
                        GeluKind kind = GeluKind::kTanhFused, Dx dx_mode = Dx::kAccumulate);

// The same on host tensors.
void gelu_forward(tensor::Tensor out, tensor::Tensor x, GeluKind kind = GeluKind::kTanhFused);
void gelu_backward(tensor::Tensor dx, tensor::Tensor dout, tensor::Tensor x,
                   GeluKind kind = GeluKind::kTanhFused);
void bias_gelu_forward(tensor::Tensor out, tensor::Tensor x, tensor::Tensor bias,
                       GeluKind kind = GeluKind::kTanhFused);
void bias_gelu_backward(tensor::Tensor dx, tensor::Tensor dbias, tensor::Tensor dout,
                        tensor::Tensor x, tensor::Tensor bias,
                        GeluKind kind = GeluKind::kTanhFused);

}  // namespace mds::ops
