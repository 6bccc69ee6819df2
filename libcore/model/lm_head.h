#pragma once

#include "model/activation_plan.h"
#include "tensor/tensor.h"

namespace mds::model {

// The last specs of GPTModelPipe at T = 1 (training.md §1.6): final LayerNorm, logits against the
// tied word embeddings (padded rows included in the softmax), cross entropy per token, and the
// micro-batch loss Σ loss·mask / Σ mask, which it returns. Reads head.input.
float lm_head_forward(const HeadActivations& head, const InputActivations& inputs,
                      tensor::Tensor ln_weight, tensor::Tensor ln_bias, tensor::Tensor word,
                      float layernorm_epsilon);

// Backward of loss · loss_scale: writes ∂/∂head.input into ws.grad and adds the LayerNorm and
// word-embedding gradients. Overwrites head.logits with the logits' gradient.
void lm_head_backward(const HeadActivations& head, const InputActivations& inputs,
                      const Workspace& ws, tensor::Tensor ln_weight, tensor::Tensor word,
                      tensor::Tensor dln_weight, tensor::Tensor dln_bias, tensor::Tensor dword,
                      float loss_scale);

}  // namespace mds::model
