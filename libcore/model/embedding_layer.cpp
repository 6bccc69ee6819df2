#include "model/embedding_layer.h"

#include "ops/embedding.h"

namespace mds::model {

using tensor::Tensor;

void embedding_layer_forward(const ops::DeviceContext& ctx, Tensor out,
                             const InputActivations& inputs, Tensor word, Tensor position,
                             const ops::DropoutStream& dropout, const TensorParallel& tp,
                             std::int64_t vocab_start, std::int64_t vocab_size) {
  ops::embedding_lookup(ctx, out, inputs.tokens, word, vocab_start, vocab_size);
  tp.sum(out);
  ops::embedding_lookup_add(ctx, out, inputs.positions, position);
  ops::dropout_forward(ctx, out, out, dropout);
}

void embedding_layer_backward(const ops::DeviceContext& ctx, Tensor dword, Tensor dposition,
                              Tensor dout, const InputActivations& inputs,
                              const ops::DropoutStream& dropout, std::int64_t vocab_start) {
  ops::dropout_backward(ctx, dout, dout, dropout);
  ops::embedding_backward(ctx, dword, dout, inputs.tokens, vocab_start);
  ops::embedding_backward(ctx, dposition, dout, inputs.positions);
}

}  // namespace mds::model
