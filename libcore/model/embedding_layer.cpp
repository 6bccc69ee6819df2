#include "model/embedding_layer.h"

#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"

namespace mds::model {

using tensor::Tensor;

void embedding_layer_forward(const ops::DeviceContext& ctx, Tensor out,
                             const InputActivations& inputs, Tensor word, Tensor position,
                             const ops::DropoutStream& dropout, const TensorParallel& tp,
                             std::int64_t vocab_start, std::int64_t vocab_size,
                             const EmbeddingNorm* norm) {
  const Tensor lookups = norm != nullptr ? norm->input : out;
  ops::embedding_lookup(ctx, lookups, inputs.tokens, word, vocab_start, vocab_size);
  tp.sum(lookups);
  if (norm != nullptr) {
    ops::layernorm_forward(ctx, out, norm->mean, norm->rstd, lookups, norm->weight, norm->bias,
                           kEmbeddingNormEpsilon);
  }
  if (position.raw() != nullptr) ops::embedding_lookup_add(ctx, out, inputs.positions, position);
  ops::dropout_forward(ctx, out, out, dropout);
}

void embedding_layer_backward(const ops::DeviceContext& ctx, Tensor dword, Tensor dposition,
                              Tensor dout, const InputActivations& inputs,
                              const ops::DropoutStream& dropout, std::int64_t vocab_start,
                              const EmbeddingNorm* norm) {
  ops::dropout_backward(ctx, dout, dout, dropout);
  if (dposition.raw() != nullptr) ops::embedding_backward(ctx, dposition, dout, inputs.positions);
  Tensor dlookups = dout;
  if (norm != nullptr) {
    // The TP sum's backward is the identity: every rank has the whole gradient already.
    ops::fill(ctx, norm->scratch, 0.0f);
    ops::layernorm_backward(ctx, norm->scratch, norm->dweight, norm->dbias, dout, norm->input,
                            norm->weight, norm->mean, norm->rstd);
    dlookups = norm->scratch;
  }
  ops::embedding_backward(ctx, dword, dlookups, inputs.tokens, vocab_start);
}

}  // namespace mds::model
