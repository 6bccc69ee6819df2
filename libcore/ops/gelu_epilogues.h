// fc1's bias and GeLU in cuBLASLt's GEMM epilogues (kernels/gemm_gelu.h), for the CUDA device's
// 16-bit MLP: the forward's GEMM, bias and GeLU in one call, and the backward's GeLU derivative
// and fc1 bias gradient inside fc2's dgrad GEMM. cuBLASLt's tanh GeLU is not bit for bit any
// ops::GeluKind (~1e-3 relative to kTanhOpenAI): a performance choice the model makes only when
// asked (ModelOptions::gemm_epilogues). There is no host version: on the host the ops of
// ops/matmul.h and ops/gelu.h compute the same function, which the GPU tests compare against.
#pragma once

#include "ops/device_context.h"
#include "ops/gelu.h"
#include "tensor/tensor.h"

namespace mds::ops {

// Whether these ops serve the MLP on ctx: a CUDA device, activations `pre_activation` of bf16 or
// fp16, a bias of their dtype, a tanh GeLU, and features (the last dimension) a multiple of 8.
bool gelu_epilogues_apply(const DeviceContext& ctx, tensor::Tensor pre_activation,
                          tensor::Tensor bias, GeluKind kind);

// out = gelu(x·weightᵀ + bias) and pre_activation = x·weightᵀ + bias; x [..., k], weight [n, k],
// bias [n], out and pre_activation [..., n].
void linear_bias_gelu_forward(const DeviceContext& ctx, tensor::Tensor out,
                              tensor::Tensor pre_activation, tensor::Tensor x,
                              tensor::Tensor weight, tensor::Tensor bias);

// For out = gelu_out·weightᵀ (weight [n, k]): dpre = (dout·weight)·gelu'(pre_activation),
// written whole, and dbias (fp32 [k]) += Σ_rows dpre, rounded to the activations' dtype first.
// dout [..., n], dpre and pre_activation [..., k].
void linear_dgelu_backward(const DeviceContext& ctx, tensor::Tensor dpre, tensor::Tensor dbias,
                           tensor::Tensor dout, tensor::Tensor weight,
                           tensor::Tensor pre_activation);

}  // namespace mds::ops
