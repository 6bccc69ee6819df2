#pragma once
#include <cstddef>
#include <cstdint>

#include "model/activation_plan.h"
#include "model/model_params.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/tensor_parallel.h"
#include "ops/attention.h"
#include "ops/device_context.h"
#include "ops/dropout.h"
#include "ops/dx_mode.h"
#include "ops/gelu.h"
#include "tensor/tensor.h"

namespace mds::model {

// Table indices of one transformer layer's parameters.
struct LayerParamIndex {
  std::size_t ln1_weight, ln1_bias, qkv_weight, qkv_bias, dense_weight, dense_bias;
  std::size_t ln2_weight, ln2_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias;

  // Fails naming the missing parameter of transformer layer `layer` (0-based).
  static LayerParamIndex find(const ParamTable& table, std::int64_t layer);
};

// Views of one layer's parameters, or of their gradients (one fp32 buffer). The four GEMM weights
// and the QKV bias come from params.linear, the rest from params.other (model_params.h).
struct LayerWeights {
  tensor::Tensor ln1_weight, ln1_bias, qkv_weight, qkv_bias, dense_weight, dense_bias;
  tensor::Tensor ln2_weight, ln2_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias;

  static LayerWeights view(const ModelParams& params, const LayerParamIndex& index);
};

// What differs between layers and micro-batches besides the weights.
struct LayerSetup {
  float layernorm_epsilon = 1e-5f;
  ops::GeluKind gelu = ops::GeluKind::kTanhFused;
  float coeff = 1.0f;  // query-key layer scaling coefficient (ops::query_key_layer_scaling_coeff)
  bool post_layernorm_residual = false;
  ops::DropoutStream attention_probs, attention_residual, mlp_residual;
  TensorParallel tp;  // the TP group the row-parallel outputs and column-parallel inputs sum over
  ops::HeadRange heads;  // this rank's heads among the layer's (numbers the attention dropout)
  bool gemm_epilogues = false;  // ModelOptions::gemm_epilogues
  // ALiBi: this rank's heads' key bias, fp32 [np, s] on ctx's device (model/alibi.h); empty
  // otherwise.
  tensor::Tensor key_bias;
};

// ParallelTransformerLayer (training.md §1.3–§1.5, §2), input and output [s, b, h], with the
// TP-local weights of this rank (its heads and MLP columns; the outputs of the attention dense and
// dense_4h_to_h GEMMs are summed over the TP group before their biases):
//   y   = r1 + dropout(dense(attention(LN1(x))) + dense.bias)          r1 = x or LN1(x)
//   out = r2 + dropout(fc2(gelu(fc1(LN2(y)) + fc1.bias)) + fc2.bias)    r2 = y or LN2(y)
// The forward fills `act` (everything the backward reads) and uses the workspace's hidden_a and
// probs_a as scratch. `output` must not alias `input`. Every tensor is on ctx's device; the
// attention core is the one the activations were planned for (act.probs on the host, act.lse
// for the flash kernels on a CUDA device), the rest of the layer is the same code on both.
void transformer_layer_forward(const ops::DeviceContext& ctx, const LayerSetup& setup,
                               const LayerWeights& w, const LayerActivations& act,
                               const Workspace& ws, tensor::Tensor input, tensor::Tensor output);

// On entry ws.grad holds ∂L/∂output, on return ∂L/∂input; parameter gradients are added to
// `grads`, except that the four GEMM weights' are written over theirs with `gemm_weight_grads`
// Dx::kOverwrite. Reads the activations of the forward that ran with the same setup and input.
void transformer_layer_backward(const ops::DeviceContext& ctx, const LayerSetup& setup,
                                const LayerWeights& w, const LayerWeights& grads,
                                const LayerActivations& act, const Workspace& ws,
                                tensor::Tensor input,
                                ops::Dx gemm_weight_grads = ops::Dx::kAccumulate);

}  // namespace mds::model
