// LayerNorm as Megatron's MixedFusedLayerNorm: y = (x − mean)/sqrt(var + eps)·w + b over the last
// dimension, biased variance, statistics in fp32 (training.md §1.3). Upstream's default eps is
// 1e-5. Each op takes the DeviceContext it runs with (ops/device_context.h) and has an overload
// without one for host tensors.
#pragma once

#include "ops/device_context.h"
#include "tensor/tensor.h"

namespace mds::ops {

// Activations (out, x; dx, dout) are fp32, bf16 or fp16, all of x's dtype: a 16-bit call widens
// its loads, computes as fp32 and rounds each output once. weight and bias are fp32 or x's dtype
// (one dtype for both; 16-bit ones are widened exactly, so they give what their fp32 widening
// gives, bit for bit); mean, rstd, dweight and dbias are fp32 whatever the activations.
//
// out, x: [..., C]; weight, bias: [C]; mean, rstd: one fp32 value per row ([...], any shape with
// that many elements), saved for the backward.
void layernorm_forward(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor mean,
                       tensor::Tensor rstd, tensor::Tensor x, tensor::Tensor weight,
                       tensor::Tensor bias, float eps);

// dx[..., C] += ∂L/∂x;  dweight[C] += Σ_rows dout·x̂;  dbias[C] += Σ_rows dout.
// dweight and dbias may be tensor::Tensor{} (frozen parameters).
void layernorm_backward(const DeviceContext& ctx, tensor::Tensor dx, tensor::Tensor dweight,
                        tensor::Tensor dbias, tensor::Tensor dout, tensor::Tensor x,
                        tensor::Tensor weight, tensor::Tensor mean, tensor::Tensor rstd);

// The same on host tensors.
void layernorm_forward(tensor::Tensor out, tensor::Tensor mean, tensor::Tensor rstd,
                       tensor::Tensor x, tensor::Tensor weight, tensor::Tensor bias, float eps);
void layernorm_backward(tensor::Tensor dx, tensor::Tensor dweight, tensor::Tensor dbias,
                        tensor::Tensor dout, tensor::Tensor x, tensor::Tensor weight,
                        tensor::Tensor mean, tensor::Tensor rstd);

}  // namespace mds::ops
