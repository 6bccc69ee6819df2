#include "model/transformer_layer.h"

#include "model/gpt_config.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/gelu_epilogues.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"

namespace mds::model {

using tensor::Tensor;

LayerParamIndex LayerParamIndex::find(const ParamTable& table, std::int64_t layer) {
  const std::int64_t spec = GptConfig::layer_spec(layer);
  const auto at = [&](const char* name) { return table.index_of(spec, name); };
  LayerParamIndex i{};
  i.ln1_weight = at("input_layernorm.weight");
  i.ln1_bias = at("input_layernorm.bias");
  i.qkv_weight = at("self_attention.query_key_value.weight");
  i.qkv_bias = at("self_attention.query_key_value.bias");
  i.dense_weight = at("self_attention.dense.weight");
  i.dense_bias = at("self_attention.dense.bias");
  i.ln2_weight = at("post_attention_layernorm.weight");
  i.ln2_bias = at("post_attention_layernorm.bias");
  i.fc1_weight = at("mlp.dense_h_to_4h.weight");
  i.fc1_bias = at("mlp.dense_h_to_4h.bias");
  i.fc2_weight = at("mlp.dense_4h_to_h.weight");
  i.fc2_bias = at("mlp.dense_4h_to_h.bias");
  return i;
}

LayerWeights LayerWeights::view(const ModelParams& params, const LayerParamIndex& i) {
  const ParamBuffer& other = *params.other;
  const ParamBuffer& linear = *params.linear;
  LayerWeights w;
  w.ln1_weight = other.view(i.ln1_weight);
  w.ln1_bias = other.view(i.ln1_bias);
  w.qkv_weight = linear.view(i.qkv_weight);
  w.qkv_bias = linear.view(i.qkv_bias);
  w.dense_weight = linear.view(i.dense_weight);
  w.dense_bias = other.view(i.dense_bias);
  w.ln2_weight = other.view(i.ln2_weight);
  w.ln2_bias = other.view(i.ln2_bias);
  w.fc1_weight = linear.view(i.fc1_weight);
  w.fc1_bias = other.view(i.fc1_bias);
  w.fc2_weight = linear.view(i.fc2_weight);
  w.fc2_bias = other.view(i.fc2_bias);
  return w;
}

namespace {

// Backward of a LayerNorm whose output also fed a residual add (post-LN residual): the residual
// gradient in `grad` joins the branch gradient before the LayerNorm backward overwrites `grad`.
void layernorm_input_backward(const ops::DeviceContext& ctx, const LayerSetup& setup, Tensor grad,
                              Tensor dweight, Tensor dbias, Tensor dln, Tensor x, Tensor weight,
                              Tensor mean, Tensor rstd) {
  if (setup.post_layernorm_residual) {
    ops::add(ctx, dln, dln, grad);
    ops::fill(ctx, grad, 0.0f);
  }
  // Otherwise `grad` already holds the residual's gradient of x and the LayerNorm adds to it.
  ops::layernorm_backward(ctx, grad, dweight, dbias, dln, x, weight, mean, rstd);
}

// The activations say which attention runs: the flash kernels keep one lse per query row, the
// host path the whole probabilities.
bool flash(const LayerActivations& act) {
  return act.lse.raw() != nullptr;
}

// act.context from act.qkv, with the attention dropout.
void attention_forward(const ops::DeviceContext& ctx, const LayerSetup& setup,
                       const LayerActivations& act, const Workspace& ws) {
  if (flash(act)) {
    ops::flash_attention_forward(ctx, act.context, act.lse, act.qkv, setup.coeff,
                                 setup.attention_probs, setup.heads, act.keep_bits, setup.key_bias);
    return;
  }
  ops::attention_probs_forward(act.probs, act.qkv, setup.coeff, setup.key_bias);
  if (setup.attention_probs.p == 0.0f) {
    ops::attention_context_forward(act.context, act.probs, act.qkv);
  } else {
    ops::attention_context_forward_with_dropout(act.context, ws.probs_a, act.probs, act.qkv,
                                                setup.attention_probs, setup.heads);
  }
}

// dqkv = the attention's gradient from dcontext.
void attention_backward(const ops::DeviceContext& ctx, const LayerSetup& setup,
                        const LayerActivations& act, const Workspace& ws, Tensor dqkv,
                        Tensor dcontext) {
  if (flash(act)) {
    ops::flash_attention_backward(ctx, dqkv, dcontext, act.context, act.lse, act.qkv, setup.coeff,
                                  setup.attention_probs, setup.heads, ops::Dx::kOverwrite,
                                  act.keep_bits, setup.key_bias);
    return;
  }
  // The host's halves add into dqkv (the probabilities' part and the context's).
  ops::fill(ctx, dqkv, 0.0f);
  const Tensor dprobs = ws.probs_b;
  if (setup.attention_probs.p == 0.0f) {
    ops::attention_context_backward(dprobs, dqkv, dcontext, act.probs, act.qkv);
  } else {
    ops::attention_context_backward_with_dropout(dprobs, dqkv, ws.probs_a, dcontext, act.probs,
                                                 act.qkv, setup.attention_probs, setup.heads);
  }
  ops::attention_probs_backward(dqkv, dprobs, act.probs, act.qkv, setup.coeff);
}

// Whether fc1's bias and GeLU ride on its GEMM's epilogue (ModelOptions::gemm_epilogues,
// ops/gelu_epilogues.h): then act.fc holds the GeLU's input with the bias added, otherwise fc1's
// bias-free output.
bool mlp_in_epilogues(const ops::DeviceContext& ctx, const LayerSetup& setup, const LayerWeights& w,
                      const LayerActivations& act) {
  return setup.gemm_epilogues && ops::gelu_epilogues_apply(ctx, act.fc, w.fc1_bias, setup.gelu);
}

}  // namespace

void transformer_layer_forward(const ops::DeviceContext& ctx, const LayerSetup& setup,
                               const LayerWeights& w, const LayerActivations& act,
                               const Workspace& ws, Tensor input, Tensor output) {
  const float eps = setup.layernorm_epsilon;
  // Attention block.
  ops::layernorm_forward(ctx, act.ln1, act.ln1_mean, act.ln1_rstd, input, w.ln1_weight, w.ln1_bias,
                         eps);
  ops::linear_forward(ctx, act.qkv, act.ln1, w.qkv_weight, w.qkv_bias);
  attention_forward(ctx, setup, act, ws);
  // The dense bias is returned separately upstream and added inside bias-dropout-add, after the
  // row-parallel sum.
  ops::linear_forward(ctx, ws.hidden_a, act.context, w.dense_weight);
  setup.tp.sum(ws.hidden_a);
  ops::bias_dropout_add_forward(ctx, act.attention_out, ws.hidden_a, w.dense_bias,
                                setup.post_layernorm_residual ? act.ln1 : input,
                                setup.attention_residual);
  // MLP block.
  ops::layernorm_forward(ctx, act.ln2, act.ln2_mean, act.ln2_rstd, act.attention_out, w.ln2_weight,
                         w.ln2_bias, eps);
  if (mlp_in_epilogues(ctx, setup, w, act)) {
    ops::linear_bias_gelu_forward(ctx, act.gelu, act.fc, act.ln2, w.fc1_weight, w.fc1_bias);
  } else {
    ops::linear_forward(ctx, act.fc, act.ln2, w.fc1_weight);
    ops::bias_gelu_forward(ctx, act.gelu, act.fc, w.fc1_bias, setup.gelu);
  }
  ops::linear_forward(ctx, ws.hidden_a, act.gelu, w.fc2_weight);
  setup.tp.sum(ws.hidden_a);
  ops::bias_dropout_add_forward(ctx, output, ws.hidden_a, w.fc2_bias,
                                setup.post_layernorm_residual ? act.ln2 : act.attention_out,
                                setup.mlp_residual);
}

void transformer_layer_backward(const ops::DeviceContext& ctx, const LayerSetup& setup,
                                const LayerWeights& w, const LayerWeights& g,
                                const LayerActivations& act, const Workspace& ws, Tensor input,
                                ops::Dx gemm_weight_grads) {
  // The ops add into every gradient they produce; each scratch gradient here is written whole by
  // the op producing it (Dx::kOverwrite: no zero fill beforehand, on a device no read of it).
  // MLP block: ws.grad = ∂L/∂out.
  const Tensor dmlp = ws.hidden_a, dgelu = ws.ffn_a, dfc = ws.ffn_b, dln2 = ws.hidden_b;
  ops::bias_dropout_add_backward(ctx, dmlp, g.fc2_bias, {}, ws.grad, setup.mlp_residual,
                                 ops::Dx::kOverwrite);
  ops::linear_backward(ctx, dgelu, g.fc2_weight, {}, dmlp, act.gelu, w.fc2_weight,
                       ops::Dx::kOverwrite, gemm_weight_grads);
  // act.fc holds the bias already when fc1's epilogue added it.
  const Tensor fc1_bias = mlp_in_epilogues(ctx, setup, w, act) ? Tensor{} : w.fc1_bias;
  ops::bias_gelu_backward(ctx, dfc, g.fc1_bias, dgelu, act.fc, fc1_bias, setup.gelu,
                          ops::Dx::kOverwrite);
  ops::linear_backward(ctx, dln2, g.fc1_weight, {}, dfc, act.ln2, w.fc1_weight, ops::Dx::kOverwrite,
                       gemm_weight_grads);
  setup.tp.sum(dln2);
  layernorm_input_backward(ctx, setup, ws.grad, g.ln2_weight, g.ln2_bias, dln2, act.attention_out,
                           w.ln2_weight, act.ln2_mean, act.ln2_rstd);

  // Attention block: ws.grad = ∂L/∂attention_out.
  const Tensor ddense = ws.hidden_a, dcontext = ws.context, dqkv = ws.qkv;
  ops::bias_dropout_add_backward(ctx, ddense, g.dense_bias, {}, ws.grad, setup.attention_residual,
                                 ops::Dx::kOverwrite);
  ops::linear_backward(ctx, dcontext, g.dense_weight, {}, ddense, act.context, w.dense_weight,
                       ops::Dx::kOverwrite, gemm_weight_grads);
  attention_backward(ctx, setup, act, ws, dqkv, dcontext);
  const Tensor dln1 = ws.hidden_a;
  ops::linear_backward(ctx, dln1, g.qkv_weight, g.qkv_bias, dqkv, act.ln1, w.qkv_weight,
                       ops::Dx::kOverwrite, gemm_weight_grads);
  setup.tp.sum(dln1);
  layernorm_input_backward(ctx, setup, ws.grad, g.ln1_weight, g.ln1_bias, dln1, input, w.ln1_weight,
                           act.ln1_mean, act.ln1_rstd);
}

}  // namespace mds::model
