#include "tasks/gpt_inference.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "model/activation_plan.h"
#include "model/alibi.h"
#include "model/embedding_layer.h"
#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"
#include "tensor/arena.h"
#include "tensor/device_memory.h"

namespace mds::tasks {

using tensor::DType;
using tensor::Tensor;

KvCache::KvCache(const model::GptConfig& config, std::int64_t batch, std::int64_t capacity,
                 tensor::Device device)
    : layers_(model::StageLayers::of(config).count()),
      heads_(config.local_heads()),
      head_dim_(config.head_dim()),
      batch_(batch),
      capacity_(capacity) {
  if (batch <= 0 || capacity <= 0) {
    base::fail("KvCache: batch and capacity must be > 0, got ", batch, " and ", capacity);
  }
  const std::int64_t floats = 2 * layers_ * batch_ * heads_ * capacity_ * head_dim_;
  data_ = tensor::Buffer(static_cast<std::size_t>(floats) * sizeof(float), device);
}

Tensor KvCache::keys(std::int64_t layer) const {
  return data_.as(DType::kFloat32, {2 * layers_ * batch_, heads_, capacity_, head_dim_})
      .narrow(layer * batch_, batch_);
}

Tensor KvCache::values(std::int64_t layer) const {
  return data_.as(DType::kFloat32, {2 * layers_ * batch_, heads_, capacity_, head_dim_})
      .narrow((layers_ + layer) * batch_, batch_);
}

// The tensors of one forward, planned for up to `tokens` positions through the layers (rows ×
// count) and `head_rows` through the head; a call with fewer uses the leading rows.
struct GptInference::Workspace {
  Workspace(std::int64_t planned_tokens, std::int64_t planned_head_rows, tensor::Arena memory)
      : tokens(planned_tokens), head_rows(planned_head_rows), arena(std::move(memory)) {}

  std::int64_t tokens, head_rows;
  tensor::Arena arena;
  // Layers: [tokens, h] x, y, ln, tmp; [tokens, local h] context; [tokens, 3·local h] qkv;
  // [tokens, local ffn] fc, act; [tokens] mean, rstd.
  Tensor x, y, ln, tmp, context, qkv, fc, act, mean, rstd;
  // int64 [2·tokens + head_rows]: token ids, positions, then the rows the head reads.
  Tensor indices;
  // Head: [head_rows, h] last, last_ln; [head_rows] mean, rstd; [head_rows, local vocab] logits.
  Tensor last, last_ln, last_mean, last_rstd, logits;
  // The host side of `indices` (the same tensor on the host).
  std::vector<std::int64_t> host_indices;
};

namespace {

struct Planned {
  tensor::ArenaPlan plan;
  std::vector<std::size_t> slots;
  void add(const char* name, DType dtype, tensor::Shape shape) {
    slots.push_back(plan.add(name, dtype, shape));
  }
};

}  // namespace

GptInference::GptInference(const model::ModelOptions& options, const model::ParamTable& table,
                           const model::ParamBuffer& params, const InferenceComms& comms,
                           const ops::DeviceContext* device)
    : options_(options),
      params_(&params),
      comms_(comms),
      tp_(comms.tp),
      device_(device),
      owns_embedding_(options.config.stage_owns(model::GptConfig::kEmbeddingSpec)),
      owns_head_(options.config.stage_owns(options.config.head_spec())),
      first_layer_(model::StageLayers::of(options.config).first) {
  model::validate(options_);
  if (params.dtype() != DType::kFloat32) {
    base::fail("GptInference: the weights must be fp32, got ", tensor::dtype_name(params.dtype()));
  }
  const model::GptConfig& c = options_.config;
  if (comms.tp_size != c.tensor_parallel_size || comms.tp_rank != c.tp_rank ||
      tp_.size() != c.tensor_parallel_size || owns_embedding_ != comms.first_stage() ||
      owns_head_ != comms.last_stage()) {
    base::fail("GptInference: the model is TP rank ", c.tp_rank, " of ", c.tensor_parallel_size,
               " with specs [", c.stage_first_spec, ", ", c.stage_end(),
               ") but its grid makes it TP rank ", comms.tp_rank, " of ", comms.tp_size,
               ", pipeline stage ", comms.pp_rank, " of ", comms.pp_size);
  }
  check_device();
  if (owns_embedding_ || owns_head_) {
    word_ = table.index_of(model::GptConfig::kEmbeddingSpec, "word_embeddings.weight");
  }
  if (owns_embedding_ && c.position_embedding == model::PositionEmbedding::kAbsolute) {
    position_ = table.index_of(model::GptConfig::kEmbeddingSpec, "position_embeddings.weight");
  }
  if (c.position_embedding == model::PositionEmbedding::kAlibi) {
    // Upstream builds it for --seq-length keys; the cache may hold up to max_position_embeddings.
    std::vector<float> bias =
        model::alibi_key_bias(c.num_attention_heads, c.first_local_head(), c.local_heads(),
                              c.max_position_embeddings, options_.alibi_bias_dtype);
    alibi_bias_ = tensor::Buffer(bias.size() * sizeof(float), context().device());
    tensor::copy(alibi_bias(), Tensor(bias.data(), DType::kFloat32, alibi_bias().shape()));
  }
  if (owns_embedding_) {
    if (c.embed_layernorm) {
      embed_norm_weight_ =
          table.index_of(model::GptConfig::kEmbeddingSpec, "word_embeddings.norm.weight");
      embed_norm_bias_ =
          table.index_of(model::GptConfig::kEmbeddingSpec, "word_embeddings.norm.bias");
    }
  }
  if (owns_head_) {
    final_ln_weight_ = table.index_of(c.final_layernorm_spec(), "weight");
    final_ln_bias_ = table.index_of(c.final_layernorm_spec(), "bias");
  }
  const model::StageLayers stage = model::StageLayers::of(c);
  for (std::int64_t layer = stage.first; layer < stage.end; ++layer) {
    layers_.push_back(model::LayerParamIndex::find(table, layer));
  }
}

GptInference::~GptInference() = default;

void GptInference::check_device() const {
  const tensor::Device device = context().device();
  const tensor::Device weights = params_->flat().device();
  if (!(weights == device)) {
    base::fail("GptInference: the weights are on ", tensor::device_name(weights),
               " but the model runs on ", tensor::device_name(device));
  }
  if (!context().is_cuda()) return;
  if (!ops::decode_attention_supports_cuda(options_.config.head_dim())) {
    base::fail("GptInference on ", tensor::device_name(device), ": head dim ",
               options_.config.head_dim(),
               " has no CUDA attention kernel (8, 16, 32, 64, 96 or 128)");
  }
}

Tensor GptInference::alibi_bias() const {
  return Tensor(alibi_bias_.data(), DType::kFloat32,
                {options_.config.local_heads(), options_.config.max_position_embeddings},
                context().device());
}

KvCache GptInference::make_cache(std::int64_t batch, std::int64_t capacity) const {
  return KvCache(options_.config, batch, capacity, device());
}

GptInference::Workspace& GptInference::workspace(std::int64_t tokens,
                                                 std::int64_t head_rows) const {
  if (workspace_ && workspace_->tokens >= tokens && workspace_->head_rows >= head_rows) {
    return *workspace_;
  }
  if (workspace_) {
    // At least double what grows, so that calls growing step by step (--recompute, LAMBADA's
    // examples) re-plan a logarithmic number of times.
    if (tokens > workspace_->tokens) tokens = std::max(tokens, 2 * workspace_->tokens);
    if (head_rows > workspace_->head_rows) {
      head_rows = std::max(head_rows, 2 * workspace_->head_rows);
    }
    tokens = std::max(tokens, workspace_->tokens);
    head_rows = std::max(head_rows, workspace_->head_rows);
  }
  workspace_.reset();  // the old arena goes before the larger one is allocated
  const model::GptConfig& c = options_.config;
  const std::int64_t h = c.hidden_size, lh = c.local_hidden(), lf = c.local_ffn();
  const std::int64_t rows = std::max<std::int64_t>(head_rows, 1);
  Planned p;
  for (const char* name : {"x", "y", "ln", "tmp"}) p.add(name, DType::kFloat32, {tokens, h});
  p.add("context", DType::kFloat32, {tokens, lh});
  p.add("qkv", DType::kFloat32, {tokens, 3 * lh});
  p.add("fc", DType::kFloat32, {tokens, lf});
  p.add("act", DType::kFloat32, {tokens, lf});
  p.add("mean", DType::kFloat32, {tokens});
  p.add("rstd", DType::kFloat32, {tokens});
  p.add("indices", DType::kInt64, {2 * tokens + head_rows});
  p.add("last", DType::kFloat32, {rows, h});
  p.add("last_ln", DType::kFloat32, {rows, h});
  p.add("last_mean", DType::kFloat32, {rows});
  p.add("last_rstd", DType::kFloat32, {rows});
  p.add("logits", DType::kFloat32, {rows, c.local_vocab()});
  auto ws = std::make_unique<Workspace>(tokens, head_rows,
                                        tensor::Arena(p.plan, device(), "GptInference workspace"));
  const tensor::Arena& a = ws->arena;
  std::size_t i = 0;
  for (Tensor* t : {&ws->x, &ws->y, &ws->ln, &ws->tmp, &ws->context, &ws->qkv, &ws->fc, &ws->act,
                    &ws->mean, &ws->rstd, &ws->indices, &ws->last, &ws->last_ln, &ws->last_mean,
                    &ws->last_rstd, &ws->logits}) {
    *t = a[p.slots[i++]];
  }
  ws->host_indices.resize(static_cast<std::size_t>(2 * tokens + head_rows));
  workspace_ = std::move(ws);
  return *workspace_;
}

void GptInference::check_tokens(std::span<const std::int64_t> tokens) const {
  // Device lookups do not check their ids (ops/embedding.h): every device gets this line.
  const std::int64_t vocab = options_.config.padded_vocab_size;
  for (const std::int64_t id : tokens) {
    if (id < 0 || id >= vocab) {
      base::fail("GptInference: token id ", id, " is outside the vocabulary [0, ", vocab, ")");
    }
  }
}

// Token ids, their positions and the rows whose logits are wanted, copied to the device at once.
void GptInference::stage_indices(Workspace& ws, std::span<const std::int64_t> tokens,
                                 std::int64_t rows, std::int64_t count, std::int64_t past,
                                 std::int64_t logits_count) const {
  const std::int64_t n = rows * count, m = owns_head_ ? rows * logits_count : 0;
  std::vector<std::int64_t>& host = ws.host_indices;
  std::copy(tokens.begin(), tokens.end(), host.begin());
  for (std::int64_t i = 0; i < n; ++i) host[static_cast<std::size_t>(n + i)] = past + i % count;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t k = 0; k < logits_count && owns_head_; ++k) {
      host[static_cast<std::size_t>(2 * n + r * logits_count + k)] =
          r * count + count - logits_count + k;
    }
  }
  const std::int64_t used = 2 * n + m;
  tensor::copy(ws.indices.narrow(0, used), Tensor(host.data(), DType::kInt64, {used}));
}

void GptInference::embed(const Workspace& ws, std::int64_t n) const {
  const Tensor x = ws.x.narrow(0, n);
  if (!owns_embedding_) {
    comms_.recv_from_previous_stage(x);
    return;
  }
  const model::GptConfig& c = options_.config;
  const ops::DeviceContext& ctx = context();
  // The vocab-parallel lookup: each TP rank adds the rows it holds, the group sums them; then
  // --embed-layernorm's norm, as the training model's (model/embedding_layer.h).
  const Tensor lookups = c.embed_layernorm ? ws.tmp.narrow(0, n) : x;
  ops::embedding_lookup(ctx, lookups, ws.indices.narrow(0, n), params_->view(word_),
                        c.vocab_start(), c.padded_vocab_size);
  tp_.sum(lookups);
  if (c.embed_layernorm) {
    ops::layernorm_forward(ctx, x, ws.mean.narrow(0, n), ws.rstd.narrow(0, n), lookups,
                           params_->view(embed_norm_weight_), params_->view(embed_norm_bias_),
                           model::kEmbeddingNormEpsilon);
  }
  if (c.position_embedding == model::PositionEmbedding::kAbsolute) {
    ops::embedding_lookup_add(ctx, x, ws.indices.narrow(n, n), params_->view(position_));
  }
}

// One layer over n = rows·count new positions, the training layer's math with the attention
// over the cache (whose length is still the positions before these).
void GptInference::layer_forward(const Workspace& ws, KvCache& cache, std::size_t index,
                                 std::int64_t n, std::int64_t count) const {
  const ops::DeviceContext& ctx = context();
  const std::int64_t layer = first_layer_ + static_cast<std::int64_t>(index);
  const std::int64_t rows = cache.batch(), lh = options_.config.local_hidden();
  const Tensor x = ws.x.narrow(0, n), y = ws.y.narrow(0, n), ln = ws.ln.narrow(0, n),
               tmp = ws.tmp.narrow(0, n), context = ws.context.narrow(0, n),
               qkv = ws.qkv.narrow(0, n), fc = ws.fc.narrow(0, n), act = ws.act.narrow(0, n),
               mean = ws.mean.narrow(0, n), rstd = ws.rstd.narrow(0, n);
  const model::LayerWeights w = model::LayerWeights::view(*params_, layers_[index]);
  const float eps = options_.layernorm_epsilon;
  const bool post_ln = options_.apply_residual_connection_post_layernorm;
  const ops::DropoutStream no_dropout;
  const float coeff = ops::query_key_layer_scaling_coeff(static_cast<int>(layer),
                                                         options_.apply_query_key_layer_scaling);
  ops::layernorm_forward(ctx, ln, mean, rstd, x, w.ln1_weight, w.ln1_bias, eps);
  ops::linear_forward(ctx, qkv, ln, w.qkv_weight, w.qkv_bias);  // column-parallel: local heads
  const std::int64_t slot = static_cast<std::int64_t>(index);
  const Tensor qkv_rows = qkv.reshape({rows, count, 3 * lh});
  ops::kv_cache_append(ctx, cache.keys(slot), cache.values(slot), qkv_rows, cache.length());
  const Tensor key_bias = alibi_bias_.data() != nullptr ? alibi_bias() : Tensor{};
  ops::decode_attention_forward(ctx, context.reshape({rows, count, lh}), qkv_rows, cache.keys(slot),
                                cache.values(slot), cache.length(), coeff, key_bias);
  ops::linear_forward(ctx, tmp, context, w.dense_weight);  // row-parallel: summed before the bias
  tp_.sum(tmp);
  ops::bias_dropout_add_forward(ctx, y, tmp, w.dense_bias, post_ln ? ln : x, no_dropout);
  ops::layernorm_forward(ctx, ln, mean, rstd, y, w.ln2_weight, w.ln2_bias, eps);
  ops::linear_forward(ctx, fc, ln, w.fc1_weight);
  ops::bias_gelu_forward(ctx, act, fc, w.fc1_bias, options_.gelu);
  ops::linear_forward(ctx, tmp, act, w.fc2_weight);
  tp_.sum(tmp);
  ops::bias_dropout_add_forward(ctx, x, tmp, w.fc2_bias, post_ln ? ln : y, no_dropout);
}

std::vector<float> GptInference::forward(KvCache& cache, std::span<const std::int64_t> tokens,
                                         std::int64_t count, std::int64_t logits_count) const {
  const model::GptConfig& c = options_.config;
  const std::int64_t b = cache.batch(), n = b * count, past = cache.length();
  if (count <= 0 || static_cast<std::int64_t>(tokens.size()) != n) {
    base::fail("GptInference: expected ", b, " rows of ", count, " tokens, got ", tokens.size());
  }
  if (logits_count < 0 || logits_count > count) {
    base::fail("GptInference: logits_count ", logits_count, " is outside [0, ", count, "]");
  }
  if (past + count > cache.capacity()) {
    base::fail("GptInference: ", past + count, " positions do not fit the cache of ",
               cache.capacity());
  }
  if (past + count > c.max_position_embeddings) {
    base::fail("GptInference: position ", past + count - 1, " is beyond --max-position-embeddings ",
               c.max_position_embeddings);
  }
  if (!(cache.device() == device())) {
    base::fail("GptInference: the cache is on ", tensor::device_name(cache.device()),
               " but the model runs on ", tensor::device_name(device()));
  }
  if (owns_embedding_) check_tokens(tokens);
  const std::int64_t m = owns_head_ ? b * logits_count : 0;
  Workspace& ws = workspace(n, m);
  stage_indices(ws, tokens, b, count, past, logits_count);
  embed(ws, n);
  for (std::size_t i = 0; i < layers_.size(); ++i) layer_forward(ws, cache, i, n, count);
  cache.length_ = past + count;
  if (!owns_head_) {
    comms_.send_to_next_stage(ws.x.narrow(0, n));
    return {};
  }
  return head(ws, n, m);
}

// The final LayerNorm and the tied head only for the m positions whose logits are wanted (rows
// picked from x by the embedding lookup, a row gather); each TP rank computes the logits of its
// vocabulary rows, joined over the group on the host.
std::vector<float> GptInference::head(const Workspace& ws, std::int64_t n, std::int64_t m) const {
  const model::GptConfig& c = options_.config;
  std::vector<float> logits(static_cast<std::size_t>(m * c.local_vocab()));
  if (m == 0) return logits;
  const ops::DeviceContext& ctx = context();
  const Tensor last = ws.last.narrow(0, m), last_ln = ws.last_ln.narrow(0, m),
               device_logits = ws.logits.narrow(0, m);
  ops::embedding_lookup(ctx, last, ws.indices.narrow(2 * n, m), ws.x.narrow(0, n));
  ops::layernorm_forward(ctx, last_ln, ws.last_mean.narrow(0, m), ws.last_rstd.narrow(0, m), last,
                         params_->view(final_ln_weight_), params_->view(final_ln_bias_),
                         options_.layernorm_epsilon);
  ops::linear_forward(ctx, device_logits, last_ln, params_->view(word_));
  tensor::copy(Tensor(logits.data(), DType::kFloat32, {m, c.local_vocab()}), device_logits);
  return comms_.gather_vocab(std::move(logits), m);
}

std::vector<float> GptInference::full_logits(std::span<const std::int64_t> tokens) const {
  const std::int64_t count = static_cast<std::int64_t>(tokens.size());
  KvCache cache = make_cache(1, std::max<std::int64_t>(count, 1));
  return forward(cache, tokens, count, count);
}

}  // namespace mds::tasks
