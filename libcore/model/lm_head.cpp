#include "model/lm_head.h"

#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"

namespace mds::model {

using tensor::Tensor;

namespace {

// Final LayerNorm, then the logits against this rank's rows of the word embedding. With 16-bit
// activations the GEMM writes 16-bit logits and the loss widens them as it reads them: upstream's
// logits.float() without the fp32 copy.
void head_logits(const ops::DeviceContext& ctx, const HeadActivations& head, Tensor ln_weight,
                 Tensor ln_bias, Tensor word, float layernorm_epsilon) {
  ops::layernorm_forward(ctx, head.ln, head.ln_mean, head.ln_rstd, head.input, ln_weight, ln_bias,
                         layernorm_epsilon);
  ops::linear_forward(ctx, head.logits, head.ln, word);
}

// Each token's loss into head.loss, leaving max and sum_exp for the backward.
void head_token_losses(const ops::DeviceContext& ctx, const HeadActivations& head,
                       const InputActivations& inputs, const TensorParallel& tp,
                       std::int64_t vocab_start) {
  if (!tp.active()) {
    ops::cross_entropy_forward(ctx, head.loss, head.max, head.sum_exp, head.logits, inputs.labels);
    return;
  }
  ops::cross_entropy_row_max(ctx, head.max, head.logits);
  tp.max(head.max);
  ops::cross_entropy_target_logit(ctx, head.target_logit, head.logits, inputs.labels, head.max,
                                  vocab_start);
  tp.sum(head.target_logit);
  ops::cross_entropy_exp_sum(ctx, head.sum_exp, head.logits, head.max);
  tp.sum(head.sum_exp);
  ops::cross_entropy_loss(ctx, head.loss, head.sum_exp, head.target_logit);
}

// From the logits' gradient (in head.logits) on: the LayerNorm output's gradient (summed over the
// TP group), the word embedding's, and the LayerNorm's into ws.grad and its parameters.
void head_backward_from_dlogits(const ops::DeviceContext& ctx, const HeadActivations& head,
                                const Workspace& ws, Tensor ln_weight, Tensor word,
                                Tensor dln_weight, Tensor dln_bias, Tensor dword,
                                const TensorParallel& tp, ops::Dx dword_mode) {
  const Tensor dln = ws.hidden_a;
  ops::linear_backward(ctx, dln, dword, {}, head.logits, head.ln, word, ops::Dx::kOverwrite,
                       dword_mode);
  tp.sum(dln);
  ops::fill(ctx, ws.grad, 0.0f);
  ops::layernorm_backward(ctx, ws.grad, dln_weight, dln_bias, dln, head.input, ln_weight,
                          head.ln_mean, head.ln_rstd);
}

}  // namespace

float lm_head_forward(const ops::DeviceContext& ctx, const HeadActivations& head,
                      const InputActivations& inputs, Tensor ln_weight, Tensor ln_bias, Tensor word,
                      float layernorm_epsilon, const TensorParallel& tp, std::int64_t vocab_start) {
  head_logits(ctx, head, ln_weight, ln_bias, word, layernorm_epsilon);
  head_token_losses(ctx, head, inputs, tp, vocab_start);
  return ops::masked_mean_loss(ctx, head.loss, inputs.loss_mask);
}

void lm_head_backward(const ops::DeviceContext& ctx, const HeadActivations& head,
                      const InputActivations& inputs, const Workspace& ws, Tensor ln_weight,
                      Tensor word, Tensor dln_weight, Tensor dln_bias, Tensor dword,
                      float loss_scale, double loss_mask_sum, const TensorParallel& tp,
                      std::int64_t vocab_start, ops::Dx dword_mode) {
  ops::masked_mean_loss_backward(ctx, head.dloss, inputs.loss_mask, loss_scale, loss_mask_sum);
  // The gradient overwrites what the forward left in head.logits (fp32: the exps; 16-bit: the
  // logits, the gradient rounded once as upstream's .float() backward rounds it).
  ops::cross_entropy_backward(ctx, head.logits, head.logits, inputs.labels, head.max, head.sum_exp,
                              head.dloss, vocab_start);
  head_backward_from_dlogits(ctx, head, ws, ln_weight, word, dln_weight, dln_bias, dword, tp,
                             dword_mode);
}

void lm_head_forward_backward(const ops::DeviceContext& ctx, const HeadActivations& head,
                              const InputActivations& inputs, const Workspace& ws,
                              const HeadWeights& weights, const HeadGradients& grads,
                              float layernorm_epsilon, float loss_scale, double loss_mask_sum,
                              const TensorParallel& tp, std::int64_t vocab_start,
                              ops::Dx dword_mode) {
  head_logits(ctx, head, weights.ln_weight, weights.ln_bias, weights.word, layernorm_epsilon);
  if (tp.active()) {
    // The vocab-parallel loss reduces over the TP group between its steps: the two passes.
    head_token_losses(ctx, head, inputs, tp, vocab_start);
    lm_head_backward(ctx, head, inputs, ws, weights.ln_weight, weights.word, grads.ln_weight,
                     grads.ln_bias, grads.word, loss_scale, loss_mask_sum, tp, vocab_start,
                     dword_mode);
    return;
  }
  ops::masked_mean_loss_backward(ctx, head.dloss, inputs.loss_mask, loss_scale, loss_mask_sum);
  ops::cross_entropy_forward_backward(ctx, head.loss, head.logits, head.logits, inputs.labels,
                                      head.dloss);
  head_backward_from_dlogits(ctx, head, ws, weights.ln_weight, weights.word, grads.ln_weight,
                             grads.ln_bias, grads.word, tp, dword_mode);
}

}  // namespace mds::model
