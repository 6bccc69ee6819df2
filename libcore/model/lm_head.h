#pragma once

#include "model/activation_plan.h"
#include "model/tensor_parallel.h"
#include "ops/device_context.h"
#include "ops/dx_mode.h"
#include "tensor/tensor.h"

namespace mds::model {

// The last specs of GPTModelPipe (training.md §1.6, §2.3): final LayerNorm, logits against this
// rank's rows [vocab_start, vocab_start + Vp/T) of the tied word embeddings (padded rows included
// in the softmax), vocab-parallel cross entropy per token (three reductions over the TP group),
// and the micro-batch loss Σ loss·mask / Σ mask, which it returns (on a device, after waiting for
// the context's stream). Reads head.input. All tensors on ctx's device.
float lm_head_forward(const ops::DeviceContext& ctx, const HeadActivations& head,
                      const InputActivations& inputs, tensor::Tensor ln_weight,
                      tensor::Tensor ln_bias, tensor::Tensor word, float layernorm_epsilon,
                      const TensorParallel& tp = {}, std::int64_t vocab_start = 0);

// Backward of loss · loss_scale: writes ∂/∂head.input into ws.grad and adds the LayerNorm and
// word-embedding gradients. `loss_mask_sum` is ops::loss_mask_sum of the micro-batch's mask,
// taken where the mask was made (on a device the backward then never waits). `dword_mode`
// Dx::kOverwrite writes the word embedding's gradient over dword's values instead. Overwrites
// head.logits with the logits' gradient. The gradient of the LayerNorm output is summed over the TP
// group (`f` of the logits GEMM). With 16-bit activations (head.logits in the activation dtype)
// `word` is in that dtype too and the logits GEMM runs in it; the cross entropy reads the 16-bit
// logits and writes their 16-bit gradient in place; LayerNorm parameters, dword and the per-token
// loss values stay fp32.
void lm_head_backward(const ops::DeviceContext& ctx, const HeadActivations& head,
                      const InputActivations& inputs, const Workspace& ws, tensor::Tensor ln_weight,
                      tensor::Tensor word, tensor::Tensor dln_weight, tensor::Tensor dln_bias,
                      tensor::Tensor dword, float loss_scale, double loss_mask_sum,
                      const TensorParallel& tp = {}, std::int64_t vocab_start = 0,
                      ops::Dx dword_mode = ops::Dx::kAccumulate);

// The head's weights and their gradients (views into the parameter and gradient buffers).
struct HeadWeights {
  tensor::Tensor ln_weight, ln_bias, word;
};
struct HeadGradients {
  tensor::Tensor ln_weight, ln_bias, word;
};

// lm_head_forward then lm_head_backward in one go, for a step that knows its loss scale before
// the forward: the same results bit for bit (the per-token losses in head.loss; the caller takes
// their masked mean with ops::masked_mean_loss, on a device a wait for the queue). At TP = 1 the
// loss and the logits' gradient come out of one pass over the logits
// (ops::cross_entropy_forward_backward) instead of a forward pass and a backward pass; at T > 1 the
// steps are those of the two functions. head.max and head.sum_exp are not written at TP = 1.
void lm_head_forward_backward(const ops::DeviceContext& ctx, const HeadActivations& head,
                              const InputActivations& inputs, const Workspace& ws,
                              const HeadWeights& weights, const HeadGradients& grads,
                              float layernorm_epsilon, float loss_scale, double loss_mask_sum,
                              const TensorParallel& tp = {}, std::int64_t vocab_start = 0,
                              ops::Dx dword_mode = ops::Dx::kAccumulate);

}  // namespace mds::model
