// fc1's bias and GeLU in cuBLASLt's GEMM epilogue (kernels/gemm_gelu.h), for the CUDA device's
// 16-bit MLP: the forward's GEMM, bias and GeLU in one call, keeping the GeLU's input (with the
// bias) for ops::bias_gelu_backward with no bias. cuBLASLt's tanh GeLU is not bit for bit any
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

}  // namespace mds::ops
