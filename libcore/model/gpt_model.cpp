#include "model/gpt_model.h"

#include <type_traits>

#include "base/error.h"
#include "model/embedding_layer.h"
#include "model/lm_head.h"
#include "ops/attention.h"

namespace mds::model {

using tensor::DType;
using tensor::Tensor;

namespace {

// Copies a [b, s] host tensor into the layers' [s, b] order, checking dtype, shape and (for ids)
// that every value lies in [0, limit).
template <typename T>
void transpose_in(Tensor dst, const Tensor& src, const char* field, std::int64_t limit) {
  const std::int64_t s = dst.dim(0), b = dst.dim(1);
  if (src.dtype() != tensor::dtype_of<T>()) {
    base::fail("MicroBatch.", field, ": expected ", tensor::dtype_name(tensor::dtype_of<T>()),
               ", got ", tensor::dtype_name(src.dtype()));
  }
  if (!(src.shape() == tensor::Shape{b, s})) {
    base::fail("MicroBatch.", field, ": expected shape [", b, ", ", s, "], got ",
               src.shape().to_string());
  }
  const T* in = src.host_span<T>().data();
  T* out = dst.data<T>();
  for (std::int64_t row = 0; row < b; ++row) {
    for (std::int64_t col = 0; col < s; ++col) {
      const T value = in[row * s + col];
      if constexpr (std::is_integral_v<T>) {
        if (value < 0 || value >= limit) {
          base::fail("MicroBatch.", field, "[", row, ", ", col, "] = ", value, " is outside [0, ",
                     limit, ")");
        }
      }
      out[col * b + row] = value;
    }
  }
}

}  // namespace

GptModel::GptModel(const ModelOptions& options, const ParamTable& table,
                   dist::Communicator* tensor_parallel)
    : options_((validate(options), options)),
      table_size_(table.size()),
      table_numel_(table.buffer_numel()),
      tp_(tensor_parallel) {
  const GptConfig& c = options_.config;
  const int tp_ranks = tensor_parallel != nullptr ? tensor_parallel->size() : 1;
  const int tp_rank = tensor_parallel != nullptr ? tensor_parallel->rank() : 0;
  if (tp_ranks != c.tensor_parallel_size || tp_rank != c.tp_rank) {
    base::fail("GptModel: the model is TP rank ", c.tp_rank, " of ", c.tensor_parallel_size,
               " but its TP group makes it rank ", tp_rank, " of ", tp_ranks);
  }
  const std::int64_t embed = GptConfig::kEmbeddingSpec;
  index_.word = table.index_of(embed, "word_embeddings.weight");
  index_.position = table.index_of(embed, "position_embeddings.weight");
  index_.final_ln_weight = table.index_of(c.final_layernorm_spec(), "weight");
  index_.final_ln_bias = table.index_of(c.final_layernorm_spec(), "bias");
  for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
    index_.layers.push_back(LayerParamIndex::find(table, layer));
  }
  const auto expect_shape = [&](std::size_t index, tensor::Shape shape) {
    if (!(table[index].local_shape == shape)) {
      base::fail("GptModel: parameter ", table[index].engine_name(), " has shape ",
                 table[index].local_shape.to_string(), " but the options need ", shape.to_string());
    }
  };
  expect_shape(index_.word, {c.local_vocab(), c.hidden_size});
  expect_shape(index_.position, {c.max_position_embeddings, c.hidden_size});
  expect_shape(index_.layers[0].fc1_weight, {c.local_ffn(), c.hidden_size});
  activations_ = std::make_unique<Activations>(options_);
}

void GptModel::check_buffer(const ParamBuffer& buffer, const char* role) const {
  if (buffer.dtype() != DType::kFloat32) {
    base::fail("GptModel: ", role, " must be fp32, got ", tensor::dtype_name(buffer.dtype()));
  }
  if (buffer.table().size() != table_size_ || buffer.table().buffer_numel() != table_numel_) {
    base::fail("GptModel: ", role, " is laid out by another parameter table (",
               buffer.table().size(), " parameters, ", buffer.table().buffer_numel(),
               " elements; the model's has ", table_size_, ", ", table_numel_, ")");
  }
}

void GptModel::load_batch(const MicroBatch& batch) {
  const InputActivations& in = activations_->inputs();
  const GptConfig& c = options_.config;
  transpose_in<std::int64_t>(in.tokens, batch.tokens, "tokens", c.padded_vocab_size);
  transpose_in<std::int64_t>(in.positions, batch.position_ids, "position_ids",
                             c.max_position_embeddings);
  transpose_in<std::int64_t>(in.labels, batch.labels, "labels", c.padded_vocab_size);
  transpose_in<float>(in.loss_mask, batch.loss_mask, "loss_mask", 0);
}

LayerSetup GptModel::layer_setup(std::int64_t layer, const DropoutContext& dropout) const {
  LayerSetup setup;
  setup.layernorm_epsilon = options_.layernorm_epsilon;
  setup.gelu = options_.gelu;
  // GPTModelPipe numbers its layers from 0 (training.md §1.4).
  setup.coeff = ops::query_key_layer_scaling_coeff(static_cast<int>(layer),
                                                   options_.apply_query_key_layer_scaling);
  setup.post_layernorm_residual = options_.apply_residual_connection_post_layernorm;
  setup.attention_probs = layer_dropout_stream(dropout, options_.attention_dropout, layer,
                                               DropoutSite::kAttentionProbs);
  setup.attention_residual = layer_dropout_stream(dropout, options_.hidden_dropout, layer,
                                                  DropoutSite::kAttentionResidual);
  setup.mlp_residual =
      layer_dropout_stream(dropout, options_.hidden_dropout, layer, DropoutSite::kMlpResidual);
  setup.tp = tp_;
  setup.heads = {options_.config.first_local_head(), options_.config.num_attention_heads};
  return setup;
}

void GptModel::forward_layer(const ParamBuffer& params, std::int64_t layer,
                             const DropoutContext& dropout) {
  const Activations& a = *activations_;
  transformer_layer_forward(
      layer_setup(layer, dropout),
      LayerWeights::view(params, index_.layers[static_cast<std::size_t>(layer)]), a.layer(layer),
      a.workspace(), a.layer_input(layer), a.layer_output(layer));
}

float GptModel::forward(const ParamBuffer& params, const DropoutContext& dropout) {
  const Activations& a = *activations_;
  embedding_layer_forward(a.layer_input(0), a.inputs(), params.view(index_.word),
                          params.view(index_.position),
                          embedding_dropout_stream(dropout, options_.hidden_dropout), tp_,
                          options_.config.vocab_start(), options_.config.padded_vocab_size);
  for (std::int64_t layer = 0; layer < options_.config.num_layers; ++layer) {
    forward_layer(params, layer, dropout);
  }
  return lm_head_forward(a.head(), a.inputs(), params.view(index_.final_ln_weight),
                         params.view(index_.final_ln_bias), params.view(index_.word),
                         options_.layernorm_epsilon, tp_, options_.config.vocab_start());
}

float GptModel::forward_backward(const ParamBuffer& params, const ParamBuffer& grads,
                                 const MicroBatch& batch, const DropoutContext& dropout,
                                 float loss_scale) {
  check_buffer(params, "params");
  check_buffer(grads, "grads");
  load_batch(batch);
  const float loss = forward(params, dropout);

  const Activations& a = *activations_;
  lm_head_backward(a.head(), a.inputs(), a.workspace(), params.view(index_.final_ln_weight),
                   params.view(index_.word), grads.view(index_.final_ln_weight),
                   grads.view(index_.final_ln_bias), grads.view(index_.word), loss_scale, tp_,
                   options_.config.vocab_start());
  const std::vector<LayerChunk>& chunks = a.chunks();
  for (auto chunk = chunks.rbegin(); chunk != chunks.rend(); ++chunk) {
    // A recomputed chunk kept only its input: run its forward again (same dropout streams, so
    // the same masks) to refill the shared activations, then go back through it.
    if (chunk->recompute) {
      for (std::int64_t layer = chunk->first; layer < chunk->end; ++layer) {
        forward_layer(params, layer, dropout);
      }
    }
    for (std::int64_t layer = chunk->end - 1; layer >= chunk->first; --layer) {
      const LayerParamIndex& index = index_.layers[static_cast<std::size_t>(layer)];
      transformer_layer_backward(layer_setup(layer, dropout), LayerWeights::view(params, index),
                                 LayerWeights::view(grads, index), a.layer(layer), a.workspace(),
                                 a.layer_input(layer));
    }
  }
  embedding_layer_backward(grads.view(index_.word), grads.view(index_.position), a.workspace().grad,
                           a.inputs(), embedding_dropout_stream(dropout, options_.hidden_dropout),
                           options_.config.vocab_start());
  return loss;
}

float GptModel::forward_loss(const ParamBuffer& params, const MicroBatch& batch,
                             const DropoutContext& dropout, Tensor token_losses) {
  check_buffer(params, "params");
  const std::int64_t s = options_.config.seq_length, b = options_.micro_batch_size;
  const bool per_token = token_losses.raw() != nullptr;
  if (per_token &&
      (token_losses.dtype() != DType::kFloat32 || !(token_losses.shape() == tensor::Shape{b, s}))) {
    base::fail("GptModel: token_losses must be fp32 [", b, ", ", s, "], got ",
               tensor::dtype_name(token_losses.dtype()), " ", token_losses.shape().to_string());
  }
  load_batch(batch);
  const float loss = forward(params, dropout);
  if (per_token) {
    const float* in = activations_->head().loss.data<float>();
    float* out = token_losses.host_span<float>().data();
    for (std::int64_t row = 0; row < b; ++row) {
      for (std::int64_t col = 0; col < s; ++col) out[row * s + col] = in[col * b + row];
    }
  }
  return loss;
}

}  // namespace mds::model
