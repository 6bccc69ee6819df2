#include "tasks/gpt_inference.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "model/activation_plan.h"
#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"

namespace mds::tasks {

using tensor::DType;
using tensor::Tensor;

namespace {

Tensor view(std::vector<float>& data, tensor::Shape shape) {
  return Tensor(data.data(), DType::kFloat32, shape);
}

Tensor view(std::vector<std::int64_t>& data, tensor::Shape shape) {
  return Tensor(data.data(), DType::kInt64, shape);
}

}  // namespace

KvCache::KvCache(const model::GptConfig& config, std::int64_t batch, std::int64_t capacity)
    : layers_(model::StageLayers::of(config).count()),
      heads_(config.local_heads()),
      head_dim_(config.head_dim()),
      batch_(batch),
      capacity_(capacity) {
  if (batch <= 0 || capacity <= 0) {
    base::fail("KvCache: batch and capacity must be > 0, got ", batch, " and ", capacity);
  }
  data_.assign(static_cast<std::size_t>(2 * layers_ * batch_ * heads_ * capacity_ * head_dim_),
               0.0f);
}

float* KvCache::keys(std::int64_t layer, std::int64_t row, std::int64_t head) {
  const std::int64_t slot = (layer * batch_ + row) * heads_ + head;
  return data_.data() + slot * capacity_ * head_dim_;
}

float* KvCache::values(std::int64_t layer, std::int64_t row, std::int64_t head) {
  return keys(layer, row, head) + layers_ * batch_ * heads_ * capacity_ * head_dim_;
}

GptInference::GptInference(const model::ModelOptions& options, const model::ParamTable& table,
                           const model::ParamBuffer& params, const InferenceComms& comms)
    : options_(options),
      params_(&params),
      comms_(comms),
      tp_(comms.tp),
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
  if (owns_embedding_ || owns_head_) {
    word_ = table.index_of(model::GptConfig::kEmbeddingSpec, "word_embeddings.weight");
  }
  if (owns_embedding_) {
    position_ = table.index_of(model::GptConfig::kEmbeddingSpec, "position_embeddings.weight");
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

void GptInference::attention(KvCache& cache, std::int64_t layer, const float* qkv, float* context,
                             std::int64_t count) const {
  const model::GptConfig& c = options_.config;
  const std::int64_t heads = c.local_heads(), hn = c.head_dim(), lh = c.local_hidden();
  const std::int64_t past = cache.length(), slot = layer - first_layer_;
  const float coeff = ops::query_key_layer_scaling_coeff(static_cast<int>(layer),
                                                         options_.apply_query_key_layer_scaling);
  const float alpha = static_cast<float>(1.0 / (std::sqrt(static_cast<double>(hn)) * coeff));
  const std::int64_t rows = cache.batch();
  // Per token the fused QKV holds, head after head, q then k then v (checkpoint version 3.0).
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t head = 0; head < heads; ++head) {
      float* keys = cache.keys(slot, r, head);
      float* values = cache.values(slot, r, head);
      for (std::int64_t i = 0; i < count; ++i) {
        const float* token = qkv + (r * count + i) * 3 * lh + head * 3 * hn;
        std::copy(token + hn, token + 2 * hn, keys + (past + i) * hn);
        std::copy(token + 2 * hn, token + 3 * hn, values + (past + i) * hn);
      }
    }
  }
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<std::size_t>(past + count));
#pragma omp for collapse(3) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t head = 0; head < heads; ++head) {
        for (std::int64_t i = 0; i < count; ++i) {
          const float* keys = cache.keys(slot, r, head);
          const float* values = cache.values(slot, r, head);
          const float* q = qkv + (r * count + i) * 3 * lh + head * 3 * hn;
          const std::int64_t visible = past + i + 1;  // the causal mask
          float max = -INFINITY;
          for (std::int64_t j = 0; j < visible; ++j) {
            float dot = 0.0f;
            for (std::int64_t d = 0; d < hn; ++d) dot += q[d] * keys[j * hn + d];
            scores[static_cast<std::size_t>(j)] = (alpha * dot) * coeff;
            max = std::fmax(max, scores[static_cast<std::size_t>(j)]);
          }
          float sum = 0.0f;
          for (std::int64_t j = 0; j < visible; ++j) {
            float& p = scores[static_cast<std::size_t>(j)];
            p = std::exp(p - max);
            sum += p;
          }
          const float inv = 1.0f / sum;
          float* out = context + (r * count + i) * lh + head * hn;
          std::fill(out, out + hn, 0.0f);
          for (std::int64_t j = 0; j < visible; ++j) {
            const float p = scores[static_cast<std::size_t>(j)] * inv;
            for (std::int64_t d = 0; d < hn; ++d) out[d] += p * values[j * hn + d];
          }
        }
      }
    }
  }
}

std::vector<float> GptInference::forward(KvCache& cache, std::span<const std::int64_t> tokens,
                                         std::int64_t count, std::int64_t logits_count) const {
  const model::GptConfig& c = options_.config;
  const std::int64_t b = cache.batch(), h = c.hidden_size, lh = c.local_hidden(),
                     lf = c.local_ffn();
  const std::int64_t n = b * count, past = cache.length();
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
  const model::ParamBuffer& params = *params_;
  std::vector<float> x(static_cast<std::size_t>(n * h)), y(x.size()), ln(x.size()), tmp(x.size()),
      ctx(static_cast<std::size_t>(n * lh)), qkv(static_cast<std::size_t>(n * 3 * lh)),
      fc(static_cast<std::size_t>(n * lf)), act(fc.size()), mean(static_cast<std::size_t>(n)),
      rstd(mean.size());
  const Tensor tx = view(x, {n, h}), ty = view(y, {n, h}), tln = view(ln, {n, h}),
               ttmp = view(tmp, {n, h}), tctx = view(ctx, {n, lh}), tqkv = view(qkv, {n, 3 * lh}),
               tfc = view(fc, {n, lf}), tact = view(act, {n, lf}), tmean = view(mean, {n}),
               trstd = view(rstd, {n});
  if (owns_embedding_) {
    std::vector<std::int64_t> ids(tokens.begin(), tokens.end()), positions(ids.size());
    for (std::int64_t i = 0; i < n; ++i) positions[static_cast<std::size_t>(i)] = past + i % count;
    // The vocab-parallel lookup: each TP rank adds the rows it holds, the group sums them.
    ops::embedding_lookup(tx, view(ids, {n}), params.view(word_), c.vocab_start(),
                          c.padded_vocab_size);
    tp_.sum(tx);
    ops::embedding_lookup_add(tx, view(positions, {n}), params.view(position_));
  } else {
    comms_.recv_from_previous_stage(tx);
  }

  const float eps = options_.layernorm_epsilon;
  const bool post_ln = options_.apply_residual_connection_post_layernorm;
  const ops::DropoutStream no_dropout;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::int64_t layer = first_layer_ + static_cast<std::int64_t>(i);
    const model::LayerWeights w = model::LayerWeights::view(params, layers_[i]);
    ops::layernorm_forward(tln, tmean, trstd, tx, w.ln1_weight, w.ln1_bias, eps);
    ops::linear_forward(tqkv, tln, w.qkv_weight, w.qkv_bias);  // column-parallel: local heads
    attention(cache, layer, qkv.data(), ctx.data(), count);
    ops::linear_forward(ttmp, tctx, w.dense_weight);  // row-parallel: summed before the bias
    tp_.sum(ttmp);
    ops::bias_dropout_add_forward(ty, ttmp, w.dense_bias, post_ln ? tln : tx, no_dropout);
    ops::layernorm_forward(tln, tmean, trstd, ty, w.ln2_weight, w.ln2_bias, eps);
    ops::linear_forward(tfc, tln, w.fc1_weight);
    ops::bias_gelu_forward(tact, tfc, w.fc1_bias, options_.gelu);
    ops::linear_forward(ttmp, tact, w.fc2_weight);
    tp_.sum(ttmp);
    ops::bias_dropout_add_forward(tx, ttmp, w.fc2_bias, post_ln ? tln : ty, no_dropout);
  }
  cache.length_ = past + count;
  if (!owns_head_) {
    comms_.send_to_next_stage(tx);
    return {};
  }
  return head(x, b, count, logits_count);
}

// The final LayerNorm and the tied head only for the positions whose logits are wanted; each TP
// rank computes the logits of its vocabulary rows, joined over the group.
std::vector<float> GptInference::head(const std::vector<float>& x, std::int64_t rows,
                                      std::int64_t count, std::int64_t logits_count) const {
  const model::GptConfig& c = options_.config;
  const std::int64_t h = c.hidden_size, m = rows * logits_count;
  std::vector<float> last(static_cast<std::size_t>(m * h)), last_ln(last.size()),
      logits(static_cast<std::size_t>(m * c.local_vocab())), mean(static_cast<std::size_t>(m)),
      rstd(mean.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* from = x.data() + (r * count + count - logits_count) * h;
    std::copy(from, from + logits_count * h, last.data() + r * logits_count * h);
  }
  if (m == 0) return logits;
  ops::layernorm_forward(view(last_ln, {m, h}), view(mean, {m}), view(rstd, {m}),
                         view(last, {m, h}), params_->view(final_ln_weight_),
                         params_->view(final_ln_bias_), options_.layernorm_epsilon);
  ops::linear_forward(view(logits, {m, c.local_vocab()}), view(last_ln, {m, h}),
                      params_->view(word_));
  return comms_.gather_vocab(std::move(logits), m);
}

std::vector<float> GptInference::full_logits(std::span<const std::int64_t> tokens) const {
  const std::int64_t count = static_cast<std::int64_t>(tokens.size());
  KvCache cache(options_.config, 1, std::max<std::int64_t>(count, 1));
  return forward(cache, tokens, count, count);
}

}  // namespace mds::tasks
