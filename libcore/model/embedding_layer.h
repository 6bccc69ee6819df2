#pragma once

#include "model/activation_plan.h"
#include "model/tensor_parallel.h"
#include "ops/device_context.h"
#include "ops/dropout.h"
#include "tensor/tensor.h"

namespace mds::model {

// Upstream builds the embedding LayerNorm with LayerNorm's default eps, not --layernorm-epsilon
// (training.md §1.2 step 4).
inline constexpr float kEmbeddingNormEpsilon = 1e-5f;

// --embed-layernorm (BLOOM): the LayerNorm over the summed lookups, with what its backward reads.
struct EmbeddingNorm {
  tensor::Tensor weight, bias;    // [h]
  tensor::Tensor dweight, dbias;  // their gradients (the backward adds into them)
  // The micro-batch's LayerNorm input (the TP-summed lookups) and statistics: written by the
  // forward, read by the backward ([s, b, h], [s, b], [s, b]).
  tensor::Tensor input, mean, rstd;
  tensor::Tensor scratch;  // [s, b, h]: the backward's gradient of `input`
};

// EmbeddingPipe (training.md §1.2, §2.3):
// out[s, b, h] = dropout(norm(word[tokens]) + position[positions]), norm the identity without
// --embed-layernorm, and no position term with ALiBi (`position` / `dposition` empty). `word` holds
// rows [vocab_start, vocab_start + Vp/T) of the tied table; each rank looks up the tokens it holds
// and the TP group sums the lookups (`g`) before the norm. All tensors on ctx's device.
void embedding_layer_forward(const ops::DeviceContext& ctx, tensor::Tensor out,
                             const InputActivations& inputs, tensor::Tensor word,
                             tensor::Tensor position, const ops::DropoutStream& dropout,
                             const TensorParallel& tp = {}, std::int64_t vocab_start = 0,
                             std::int64_t vocab_size = -1, const EmbeddingNorm* norm = nullptr);

// dout = ∂L/∂out is consumed (the dropout backward runs in place on it); the table gradients
// receive the scatter-add of the lookups, and the norm's its parameter gradients.
void embedding_layer_backward(const ops::DeviceContext& ctx, tensor::Tensor dword,
                              tensor::Tensor dposition, tensor::Tensor dout,
                              const InputActivations& inputs, const ops::DropoutStream& dropout,
                              std::int64_t vocab_start = 0, const EmbeddingNorm* norm = nullptr);

}  // namespace mds::model
