#include "model/gpt_model.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "base/error.h"
#include "model/alibi.h"
#include "model/embedding_layer.h"
#include "model/lm_head.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "tensor/device_memory.h"

namespace mds::model {

using tensor::DType;
using tensor::Tensor;

namespace {

// Copies a [b, s] host tensor into the layers' [s, b] order, checking dtype, shape and (for ids)
// that every value lies in [0, limit).
template <typename T>
void transpose_in(Tensor dst, const Tensor& src, const char* field, std::int64_t limit) {
  const std::int64_t s = dst.dim(0), b = dst.dim(1);
  if (src.raw() == nullptr) {
    base::fail("MicroBatch.", field, " is missing; this pipeline stage reads it");
  }
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
                   dist::Communicator* tensor_parallel, int num_buffers,
                   const ops::DeviceContext* device)
    : options_((validate(options), options)),
      device_(device),
      table_size_(table.size()),
      table_numel_(table.buffer_numel()),
      owns_embedding_(options_.config.stage_owns(GptConfig::kEmbeddingSpec)),
      owns_head_(options_.config.stage_owns(options_.config.head_spec())),
      tp_(tensor_parallel) {
  const GptConfig& c = options_.config;
  const int tp_ranks = tensor_parallel != nullptr ? tensor_parallel->size() : 1;
  const int tp_rank = tensor_parallel != nullptr ? tensor_parallel->rank() : 0;
  if (tp_ranks != c.tensor_parallel_size || tp_rank != c.tp_rank) {
    base::fail("GptModel: the model is TP rank ", c.tp_rank, " of ", c.tensor_parallel_size,
               " but its TP group makes it rank ", tp_rank, " of ", tp_ranks);
  }
  if (num_buffers < 1) base::fail("GptModel: num_buffers must be at least 1, got ", num_buffers);
  const auto expect_shape = [&](std::size_t index, tensor::Shape shape) {
    if (!(table[index].local_shape == shape)) {
      base::fail("GptModel: parameter ", table[index].engine_name(), " has shape ",
                 table[index].local_shape.to_string(), " but the options need ", shape.to_string());
    }
  };
  const std::int64_t embed = GptConfig::kEmbeddingSpec;
  if (owns_embedding_ || owns_head_) {
    index_.word = table.index_of(embed, "word_embeddings.weight");
    expect_shape(index_.word, {c.local_vocab(), c.hidden_size});
  }
  if (owns_embedding_ && c.position_embedding == PositionEmbedding::kAbsolute) {
    index_.position = table.index_of(embed, "position_embeddings.weight");
    expect_shape(index_.position, {c.max_position_embeddings, c.hidden_size});
  }
  if (owns_embedding_) {
    if (c.embed_layernorm) {
      index_.embed_norm_weight = table.index_of(embed, "word_embeddings.norm.weight");
      index_.embed_norm_bias = table.index_of(embed, "word_embeddings.norm.bias");
    }
  }
  if (owns_head_) {
    index_.final_ln_weight = table.index_of(c.final_layernorm_spec(), "weight");
    index_.final_ln_bias = table.index_of(c.final_layernorm_spec(), "bias");
  }
  const StageLayers stage = StageLayers::of(c);
  for (std::int64_t layer = stage.first; layer < stage.end; ++layer) {
    index_.layers.push_back(LayerParamIndex::find(table, layer));
  }
  if (!index_.layers.empty())
    expect_shape(index_.layers[0].fc1_weight, {c.local_ffn(), c.hidden_size});
  // The GEMMs that write their weight's whole gradient (the head's first, before the embedding
  // adds the lookups into the tied replica).
  std::vector<std::size_t> overwritten;
  if (owns_head_) overwritten.push_back(index_.word);
  for (const LayerParamIndex& layer : index_.layers) {
    for (const std::size_t p :
         {layer.qkv_weight, layer.dense_weight, layer.fc1_weight, layer.fc2_weight}) {
      overwritten.push_back(p);
    }
  }
  zeroed_before_overwrite_ = ranges_not_overwritten(table, overwritten);
  check_device_support();
  if (c.position_embedding == PositionEmbedding::kAlibi) {
    std::vector<float> bias =
        alibi_key_bias(c.num_attention_heads, c.first_local_head(), c.local_heads(), c.seq_length,
                       options_.alibi_bias_dtype);
    alibi_bias_ = tensor::Buffer(bias.size() * sizeof(float), this->device());
    tensor::copy(alibi_bias(), Tensor(bias.data(), DType::kFloat32, alibi_bias().shape()));
  }
  activations_ = std::make_unique<Activations>(options_, num_buffers, this->device());
  if (context().is_cuda()) {
    const std::int64_t s = c.seq_length, b = options_.micro_batch_size;
    tensor::ArenaPlan plan;
    const std::size_t tokens = plan.add("tokens", DType::kInt64, {s, b});
    const std::size_t positions = plan.add("position_ids", DType::kInt64, {s, b});
    const std::size_t labels = plan.add("labels", DType::kInt64, {s, b});
    const std::size_t mask = plan.add("loss_mask", DType::kFloat32, {s, b});
    const std::size_t losses = plan.add("token_losses", DType::kFloat32, {s, b});
    staging_ = std::make_unique<HostStaging>(
        HostStaging{tensor::Arena(plan, tensor::Device{}, "GptModel host staging"), {}, {}});
    const tensor::Arena& arena = staging_->arena;
    staging_->inputs = {arena[tokens], arena[positions], arena[labels], arena[mask]};
    staging_->token_losses = arena[losses];
  }
  buffers_.assign(static_cast<std::size_t>(num_buffers), BufferState{});
}

void GptModel::check_device_support() const {
  if (!context().is_cuda()) return;
  const GptConfig& c = options_.config;
  const std::string where = "GptModel on " + tensor::device_name(device());
  const std::int64_t head_dim = c.hidden_size / c.num_attention_heads;
  if (!ops::flash_attention_supports(head_dim)) {
    base::fail(where, ": head dim ", head_dim, " (hidden ", c.hidden_size, " / ",
               c.num_attention_heads,
               " heads) has no flash-attention kernel (8, 16, 32, 64, 96 or 128)");
  }
}

void GptModel::check_buffer(const ParamBuffer& buffer, const char* role, DType dtype) const {
  if (buffer.dtype() != dtype) {
    base::fail("GptModel: ", role, " must be ", tensor::dtype_name(dtype), ", got ",
               tensor::dtype_name(buffer.dtype()));
  }
  if (!(buffer.flat().device() == device())) {
    base::fail("GptModel: ", role, " are on ", tensor::device_name(buffer.flat().device()),
               " but the model runs on ", tensor::device_name(device()));
  }
  if (buffer.table().size() != table_size_ || buffer.table().buffer_numel() != table_numel_) {
    base::fail("GptModel: ", role, " is laid out by another parameter table (",
               buffer.table().size(), " parameters, ", buffer.table().buffer_numel(),
               " elements; the model's has ", table_size_, ", ", table_numel_, ")");
  }
}

void GptModel::check_params(const ModelParams& params) const {
  // With fp32 activations both are the one fp32 buffer; with 16-bit ones `other` may be the 16-bit
  // weights themselves or an fp32 copy of them.
  const DType activations = options_.activation_dtype, other = params.other->dtype();
  if (other != DType::kFloat32 && activations != DType::kFloat32 && other != activations) {
    base::fail("GptModel: params must be float32 or ", tensor::dtype_name(activations), ", got ",
               tensor::dtype_name(other));
  }
  check_buffer(*params.other, "params", other == activations ? activations : DType::kFloat32);
  check_buffer(*params.linear, "the linear layers' params (the activation dtype)",
               options_.activation_dtype);
}

void GptModel::check_whole_model(const char* call) const {
  if (!owns_embedding_ || !owns_head_) {
    base::fail("GptModel::", call, " runs the whole model, but this is pipeline stage [",
               options_.config.stage_first_spec, ", ", options_.config.stage_end(),
               "); use forward_stage and backward_stage");
  }
}

void GptModel::check_hidden(const Tensor& hidden, bool wanted, const char* role) const {
  const bool given = hidden.raw() != nullptr;
  if (!wanted) {
    if (given) {
      base::fail("GptModel: ", role, " must be empty on pipeline stage [",
                 options_.config.stage_first_spec, ", ", options_.config.stage_end(), ")");
    }
    return;
  }
  const tensor::Shape expected{options_.config.seq_length, options_.micro_batch_size,
                               options_.config.hidden_size};
  const DType dtype = options_.activation_dtype;
  if (!given || (hidden.dtype() != DType::kFloat32 && hidden.dtype() != dtype) ||
      !(hidden.shape() == expected) || hidden.device() != device()) {
    base::fail("GptModel: ", role, " must be an fp32",
               dtype != DType::kFloat32 ? " or " + std::string(tensor::dtype_name(dtype)) : "", " ",
               expected.to_string(), " tensor on ", tensor::device_name(device()),
               " on pipeline stage [", options_.config.stage_first_spec, ", ",
               options_.config.stage_end(), "), got ",
               given ? tensor::dtype_name(hidden.dtype()) : "none", " ", hidden.shape().to_string(),
               given ? " on " + tensor::device_name(hidden.device()) : "");
  }
}

int GptModel::checked_pipe_buffer(int buffer) const {
  if (buffer < 0 || buffer >= num_buffers()) {
    base::fail("GptModel: pipe buffer ", buffer, " is outside [0, ", num_buffers(), ")");
  }
  return buffer;
}

double GptModel::load_batch(int buffer, const MicroBatch& batch) {
  const InputActivations& in = activations_->inputs(buffer);
  // The ids are checked here on the host: the device ops do not read them back.
  const InputActivations& host = staging_ ? staging_->inputs : in;
  const GptConfig& c = options_.config;
  if (owns_embedding_) {
    transpose_in<std::int64_t>(host.tokens, batch.tokens, "tokens", c.padded_vocab_size);
    transpose_in<std::int64_t>(host.positions, batch.position_ids, "position_ids",
                               c.max_position_embeddings);
  }
  double loss_mask_sum = 0.0;
  if (owns_head_) {
    transpose_in<std::int64_t>(host.labels, batch.labels, "labels", c.padded_vocab_size);
    transpose_in<float>(host.loss_mask, batch.loss_mask, "loss_mask", 0);
    // Summed here, in the model's token order, so the device's loss backward need not read it.
    loss_mask_sum = ops::loss_mask_sum(host.loss_mask);
  }
  if (!staging_) return loss_mask_sum;
  for (const auto& [device_side, host_side] :
       {std::pair{in.tokens, host.tokens}, std::pair{in.positions, host.positions},
        std::pair{in.labels, host.labels}, std::pair{in.loss_mask, host.loss_mask}}) {
    if (device_side.raw() != nullptr) tensor::copy(device_side, host_side);
  }
  return loss_mask_sum;
}

LayerSetup GptModel::layer_setup(std::int64_t layer, const DropoutContext& dropout) const {
  LayerSetup setup;
  setup.layernorm_epsilon = options_.layernorm_epsilon;
  setup.gelu = options_.gelu;
  setup.gemm_epilogues = options_.gemm_epilogues;
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
  if (alibi_bias_.data() != nullptr) setup.key_bias = alibi_bias();
  return setup;
}

const LayerParamIndex& GptModel::layer_index(std::int64_t layer) const {
  return index_.layers[static_cast<std::size_t>(layer - activations_->stage_layers().first)];
}

void GptModel::forward_layer(int buffer, const ModelParams& params, std::int64_t layer) {
  const Activations& a = *activations_;
  const DropoutContext& dropout = buffers_[static_cast<std::size_t>(buffer)].dropout;
  transformer_layer_forward(context(), layer_setup(layer, dropout),
                            LayerWeights::view(params, layer_index(layer)), a.layer(buffer, layer),
                            a.workspace(), a.layer_input(buffer, layer),
                            a.layer_output(buffer, layer));
}

Tensor GptModel::alibi_bias() const {
  return Tensor(alibi_bias_.data(), DType::kFloat32,
                {options_.config.local_heads(), options_.config.seq_length}, device());
}

bool GptModel::absolute_positions() const {
  return options_.config.position_embedding == PositionEmbedding::kAbsolute;
}

Tensor GptModel::position_table(const ParamBuffer& buffer) const {
  return absolute_positions() ? buffer.view(index_.position) : Tensor{};
}

EmbeddingNorm GptModel::embedding_norm(int buffer, const ModelParams& params,
                                       const ParamBuffer* grads) const {
  EmbeddingNorm norm;
  norm.weight = params.other->view(index_.embed_norm_weight);
  norm.bias = params.other->view(index_.embed_norm_bias);
  if (grads != nullptr) {
    norm.dweight = grads->view(index_.embed_norm_weight);
    norm.dbias = grads->view(index_.embed_norm_bias);
  }
  const EmbeddingActivations& act = activations_->embedding(buffer);
  norm.input = act.norm_input;
  norm.mean = act.norm_mean;
  norm.rstd = act.norm_rstd;
  norm.scratch = activations_->workspace().hidden_a;
  return norm;
}

void GptModel::forward_body(int buffer, const ModelParams& params) {
  const Activations& a = *activations_;
  const DropoutContext& dropout = buffers_[static_cast<std::size_t>(buffer)].dropout;
  if (owns_embedding_) {
    const bool normed = options_.config.embed_layernorm;
    const EmbeddingNorm norm = normed ? embedding_norm(buffer, params) : EmbeddingNorm{};
    embedding_layer_forward(context(), a.stage_input(buffer), a.inputs(buffer),
                            params.other->view(index_.word), position_table(*params.other),
                            embedding_dropout_stream(dropout, options_.hidden_dropout), tp_,
                            options_.config.vocab_start(), options_.config.padded_vocab_size,
                            normed ? &norm : nullptr);
  }
  const StageLayers& stage = a.stage_layers();
  for (std::int64_t layer = stage.first; layer < stage.end; ++layer) {
    forward_layer(buffer, params, layer);
  }
}

float GptModel::forward(int buffer, const ModelParams& params) {
  forward_body(buffer, params);
  if (!owns_head_) return 0.0f;
  const Activations& a = *activations_;
  head_buffer_ = buffer;
  return lm_head_forward(context(), a.head(buffer), a.inputs(buffer),
                         params.other->view(index_.final_ln_weight),
                         params.other->view(index_.final_ln_bias), params.linear->view(index_.word),
                         options_.layernorm_epsilon, tp_, options_.config.vocab_start());
}

std::vector<GptModel::FlatRange> GptModel::ranges_not_overwritten(
    const ParamTable& table, const std::vector<std::size_t>& overwritten) {
  std::vector<FlatRange> written;
  for (const std::size_t p : overwritten) {
    written.push_back({table[p].offset, table[p].local_numel()});
  }
  std::sort(written.begin(), written.end(),
            [](const FlatRange& a, const FlatRange& b) { return a.offset < b.offset; });
  std::vector<FlatRange> rest;
  std::int64_t next = 0;
  for (const FlatRange& range : written) {
    if (range.offset > next) rest.push_back({next, range.offset - next});
    next = std::max(next, range.offset + range.numel);
  }
  if (table.buffer_numel() > next) rest.push_back({next, table.buffer_numel() - next});
  return rest;
}

namespace {

void report_ready(const GradientsReady& ready, std::initializer_list<std::size_t> finished) {
  if (ready) ready(std::span<const std::size_t>(finished.begin(), finished.size()));
}

}  // namespace

ops::Dx GptModel::prepare_gradients(const ParamBuffer& grads, GradientWrite write) const {
  if (write != GradientWrite::kOverwrite) return ops::Dx::kAccumulate;
  const Tensor flat = grads.flat();
  for (const FlatRange& range : zeroed_before_overwrite_) {
    ops::fill(context(), flat.narrow(range.offset, range.numel), 0.0f);
  }
  return ops::Dx::kOverwrite;
}

void GptModel::report_head_ready(const GradientsReady& ready) const {
  report_ready(ready, {index_.final_ln_weight, index_.final_ln_bias});
  // The first stage's embedding backward adds its lookups' gradient to the word embedding's.
  if (!owns_embedding_) report_ready(ready, {index_.word});
}

void GptModel::backward(int buffer, const ModelParams& params, const ParamBuffer& grads,
                        float loss_scale, GradientWrite write, const GradientsReady& ready) {
  const Activations& a = *activations_;
  const ops::Dx gemm_weight_grads = prepare_gradients(grads, write);
  if (owns_head_) {
    lm_head_backward(context(), a.head(buffer), a.inputs(buffer), a.workspace(),
                     params.other->view(index_.final_ln_weight), params.linear->view(index_.word),
                     grads.view(index_.final_ln_weight), grads.view(index_.final_ln_bias),
                     grads.view(index_.word), loss_scale,
                     buffers_[static_cast<std::size_t>(buffer)].loss_mask_sum, tp_,
                     options_.config.vocab_start(), gemm_weight_grads);
    head_buffer_ = -1;  // the backward overwrote the logits with their gradient
    report_head_ready(ready);
  }
  backward_body(buffer, params, grads, gemm_weight_grads, ready);
}

void GptModel::backward_body(int buffer, const ModelParams& params, const ParamBuffer& grads,
                             ops::Dx gemm_weight_grads, const GradientsReady& ready) {
  const auto report = [&ready](std::initializer_list<std::size_t> finished) {
    report_ready(ready, finished);
  };
  const Activations& a = *activations_;
  const DropoutContext& dropout = buffers_[static_cast<std::size_t>(buffer)].dropout;
  const std::vector<LayerChunk>& chunks = a.chunks();
  for (auto chunk = chunks.rbegin(); chunk != chunks.rend(); ++chunk) {
    // A recomputed chunk kept only its input: run its forward again (same dropout streams, so
    // the same masks) to refill the shared activations, then go back through it.
    if (chunk->recompute) {
      for (std::int64_t layer = chunk->first; layer < chunk->end; ++layer) {
        forward_layer(buffer, params, layer);
      }
    }
    for (std::int64_t layer = chunk->end - 1; layer >= chunk->first; --layer) {
      const LayerParamIndex& index = layer_index(layer);
      transformer_layer_backward(context(), layer_setup(layer, dropout),
                                 LayerWeights::view(params, index),
                                 LayerWeights::view(grads, index), a.layer(buffer, layer),
                                 a.workspace(), a.layer_input(buffer, layer), gemm_weight_grads);
      report({index.ln1_weight, index.ln1_bias, index.qkv_weight, index.qkv_bias,
              index.dense_weight, index.dense_bias, index.ln2_weight, index.ln2_bias,
              index.fc1_weight, index.fc1_bias, index.fc2_weight, index.fc2_bias});
    }
  }
  if (owns_embedding_) {
    const bool normed = options_.config.embed_layernorm;
    const EmbeddingNorm norm = normed ? embedding_norm(buffer, params, &grads) : EmbeddingNorm{};
    embedding_layer_backward(context(), grads.view(index_.word), position_table(grads),
                             a.workspace().grad, a.inputs(buffer),
                             embedding_dropout_stream(dropout, options_.hidden_dropout),
                             options_.config.vocab_start(), normed ? &norm : nullptr);
    report({index_.word});
    if (absolute_positions()) report({index_.position});
    if (normed) report({index_.embed_norm_weight, index_.embed_norm_bias});
  }
}

void GptModel::start_forward(BufferState& state, int buffer, const MicroBatch& batch,
                             const DropoutContext& dropout, Tensor input_hidden) {
  state = BufferState{dropout, false, load_batch(buffer, batch)};
  if (head_buffer_ == buffer) head_buffer_ = -1;
  const Tensor& own_input = activations_->stage_input(buffer);
  if (!owns_embedding_ && input_hidden.raw() != own_input.raw()) {
    ops::cast(context(), own_input, input_hidden);
  }
}

float GptModel::forward_stage(int buffer, const ModelParams& params, const MicroBatch& batch,
                              const DropoutContext& dropout, Tensor input_hidden,
                              Tensor output_hidden) {
  BufferState& state = buffers_[static_cast<std::size_t>(checked_pipe_buffer(buffer))];
  check_params(params);
  check_hidden(input_hidden, !owns_embedding_, "input_hidden");
  check_hidden(output_hidden, !owns_head_, "output_hidden");
  start_forward(state, buffer, batch, dropout, input_hidden);
  const float loss = forward(buffer, params);
  const Tensor& own_output = activations_->stage_output(buffer);
  if (!owns_head_ && output_hidden.raw() != own_output.raw()) {
    ops::cast(context(), output_hidden, own_output);
  }
  state.forward_done = true;
  return loss;
}

void GptModel::backward_stage(int buffer, const ModelParams& params, const ParamBuffer& grads,
                              Tensor output_grad, Tensor input_grad, float loss_scale,
                              GradientWrite write, const GradientsReady& ready) {
  BufferState& state = buffers_[static_cast<std::size_t>(checked_pipe_buffer(buffer))];
  check_params(params);
  check_buffer(grads, "grads", DType::kFloat32);
  check_hidden(output_grad, !owns_head_, "output_grad");
  check_hidden(input_grad, !owns_embedding_, "input_grad");
  if (!state.forward_done) {
    base::fail("GptModel::backward_stage: pipe buffer ", buffer,
               " holds no forward (run forward_stage into it first, once per backward)");
  }
  if (owns_head_ && head_buffer_ != buffer) {
    base::fail("GptModel::backward_stage: the last stage's pipe buffers share the head, so the ",
               "backward of buffer ", buffer, " must follow its forward directly (1F1B)");
  }
  const Tensor& grad = activations_->workspace().grad;
  if (!owns_head_) ops::cast(context(), grad, output_grad);
  backward(buffer, params, grads, loss_scale, write, ready);
  if (!owns_embedding_) ops::cast(context(), input_grad, grad);
  state.forward_done = false;
}

float GptModel::forward_backward(const ModelParams& params, const ParamBuffer& grads,
                                 const MicroBatch& batch, const DropoutContext& dropout,
                                 float loss_scale, GradientWrite write,
                                 const GradientsReady& ready) {
  check_whole_model("forward_backward");
  return forward_backward_stage(0, params, grads, batch, dropout, {}, {}, loss_scale, write, ready);
}

float GptModel::forward_backward_stage(int buffer, const ModelParams& params,
                                       const ParamBuffer& grads, const MicroBatch& batch,
                                       const DropoutContext& dropout, Tensor input_hidden,
                                       Tensor input_grad, float loss_scale, GradientWrite write,
                                       const GradientsReady& ready) {
  if (!owns_head_) {
    base::fail("GptModel::forward_backward_stage: this stage does not hold the head (the last ",
               "stage's call; the others run forward_stage and backward_stage)");
  }
  BufferState& state = buffers_[static_cast<std::size_t>(checked_pipe_buffer(buffer))];
  check_params(params);
  check_buffer(grads, "grads", DType::kFloat32);
  check_hidden(input_hidden, !owns_embedding_, "input_hidden");
  check_hidden(input_grad, !owns_embedding_, "input_grad");
  start_forward(state, buffer, batch, dropout, input_hidden);
  head_buffer_ = -1;  // the shared head ends up holding this micro-batch's logits' gradient
  const Activations& a = *activations_;
  forward_body(buffer, params);
  // The loss scale is known before the forward: the head runs its forward and backward together
  // (at TP = 1 one pass over the logits for the loss and their gradient).
  const ops::Dx gemm_weight_grads = prepare_gradients(grads, write);
  lm_head_forward_backward(
      context(), a.head(buffer), a.inputs(buffer), a.workspace(),
      {params.other->view(index_.final_ln_weight), params.other->view(index_.final_ln_bias),
       params.linear->view(index_.word)},
      {grads.view(index_.final_ln_weight), grads.view(index_.final_ln_bias),
       grads.view(index_.word)},
      options_.layernorm_epsilon, loss_scale, state.loss_mask_sum, tp_,
      options_.config.vocab_start(), gemm_weight_grads);
  report_head_ready(ready);
  // On a device reading the loss waits for the queue to drain: here, where forward_stage waited
  // too, so that the host prepares the next micro-batch while the device runs the layers'
  // backward (read after the backward, the device would idle through that).
  const float loss =
      ops::masked_mean_loss(context(), a.head(buffer).loss, a.inputs(buffer).loss_mask);
  backward_body(buffer, params, grads, gemm_weight_grads, ready);
  if (!owns_embedding_) ops::cast(context(), input_grad, a.workspace().grad);
  return loss;
}

float GptModel::forward_loss(const ModelParams& params, const MicroBatch& batch,
                             const DropoutContext& dropout, Tensor token_losses) {
  check_whole_model("forward_loss");
  check_params(params);
  const float loss = forward_stage(0, params, batch, dropout, {}, {});
  if (token_losses.raw() != nullptr) copy_token_losses(0, token_losses);
  return loss;
}

void GptModel::copy_token_losses(int buffer, Tensor token_losses) const {
  const std::int64_t s = options_.config.seq_length, b = options_.micro_batch_size;
  if (token_losses.dtype() != DType::kFloat32 || !(token_losses.shape() == tensor::Shape{b, s})) {
    base::fail("GptModel: token_losses must be fp32 [", b, ", ", s, "], got ",
               tensor::dtype_name(token_losses.dtype()), " ", token_losses.shape().to_string());
  }
  if (!owns_head_ || head_buffer_ != checked_pipe_buffer(buffer)) {
    base::fail("GptModel::copy_token_losses: pipe buffer ", buffer,
               " holds no forward through the head (the last stage's latest forward)");
  }
  const Tensor& loss = activations_->head(buffer).loss;
  if (staging_) tensor::copy(staging_->token_losses, loss);
  const float* in = (staging_ ? staging_->token_losses : loss).data<float>();
  float* out = token_losses.host_span<float>().data();
  for (std::int64_t row = 0; row < b; ++row) {
    for (std::int64_t col = 0; col < s; ++col) out[row * s + col] = in[col * b + row];
  }
}

}  // namespace mds::model
