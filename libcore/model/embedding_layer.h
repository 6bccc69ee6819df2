#pragma once

#include "model/activation_plan.h"
#include "ops/dropout.h"
#include "tensor/tensor.h"

namespace mds::model {

// EmbeddingPipe at T = 1 with absolute positions (training.md §1.2):
// out[s, b, h] = dropout(word[tokens] + position[positions]). `word` is the tied table [Vp, h].
void embedding_layer_forward(tensor::Tensor out, const InputActivations& inputs,
                             tensor::Tensor word, tensor::Tensor position,
                             const ops::DropoutStream& dropout);

// dout = ∂L/∂out is consumed (the dropout backward runs in place on it); the table gradients
// receive the scatter-add of the lookups.
void embedding_layer_backward(tensor::Tensor dword, tensor::Tensor dposition, tensor::Tensor dout,
                              const InputActivations& inputs, const ops::DropoutStream& dropout);

}  // namespace mds::model
