#pragma once

#include "model/activation_plan.h"
#include "model/tensor_parallel.h"
#include "ops/device_context.h"
#include "ops/dropout.h"
#include "tensor/tensor.h"

namespace mds::model {

// EmbeddingPipe with absolute positions (training.md §1.2, §2.3):
// out[s, b, h] = dropout(word[tokens] + position[positions]). `word` holds rows
// [vocab_start, vocab_start + Vp/T) of the tied table; each rank looks up the tokens it holds and
// the TP group sums the lookups (`g`) before the positions are added. All tensors on ctx's device.
void embedding_layer_forward(const ops::DeviceContext& ctx, tensor::Tensor out,
                             const InputActivations& inputs, tensor::Tensor word,
                             tensor::Tensor position, const ops::DropoutStream& dropout,
                             const TensorParallel& tp = {}, std::int64_t vocab_start = 0,
                             std::int64_t vocab_size = -1);

// dout = ∂L/∂out is consumed (the dropout backward runs in place on it); the table gradients
// receive the scatter-add of the lookups.
void embedding_layer_backward(const ops::DeviceContext& ctx, tensor::Tensor dword,
                              tensor::Tensor dposition, tensor::Tensor dout,
                              const InputActivations& inputs, const ops::DropoutStream& dropout,
                              std::int64_t vocab_start = 0);

}  // namespace mds::model
