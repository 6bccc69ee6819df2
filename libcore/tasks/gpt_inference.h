// Inference forward of the GPT model (T = P = 1, fp32, no dropout) that returns logits and keeps
// each layer's keys and values in a cache, so that decoding one more token costs one position
// instead of the whole prefix (upstream's generation recomputes nothing either unless
// --recompute). The math is the training forward's (model/transformer_layer.h) with attention over
// the cached positions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/model_options.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/transformer_layer.h"

namespace mds::tasks {

// Keys and values of every layer for `batch` rows and up to `capacity` positions, all rows at the
// same length.
class KvCache {
 public:
  KvCache(const model::GptConfig& config, std::int64_t batch, std::int64_t capacity);
  std::int64_t batch() const { return batch_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t length() const { return length_; }
  void clear() { length_ = 0; }

 private:
  friend class GptInference;
  // [capacity, head_dim] of one (layer, row, head); values follow all keys.
  float* keys(std::int64_t layer, std::int64_t row, std::int64_t head);
  float* values(std::int64_t layer, std::int64_t row, std::int64_t head);

  std::int64_t layers_, heads_, head_dim_, batch_, capacity_;
  std::int64_t length_ = 0;
  std::vector<float> data_;
};

class GptInference {
 public:
  // `params` (fp32, laid out by `table`) must outlive this object. Dropout settings are ignored.
  GptInference(const model::ModelOptions& options, const model::ParamTable& table,
               const model::ParamBuffer& params);

  const model::ModelOptions& options() const { return options_; }
  std::int64_t padded_vocab_size() const { return options_.config.padded_vocab_size; }

  // Feeds `count` new tokens per row (tokens: [cache.batch(), count] row-major) at positions
  // cache.length() .. cache.length() + count − 1, appends their keys and values to the cache, and
  // returns the logits of each row's last `logits_count` new positions:
  // [batch, logits_count, padded_vocab] row-major. Fails when the cache or the position
  // embeddings have no room for the tokens.
  std::vector<float> forward(KvCache& cache, std::span<const std::int64_t> tokens,
                             std::int64_t count, std::int64_t logits_count = 1) const;

  // Logits of every position of one sequence, without a cache: [tokens.size(), padded_vocab].
  std::vector<float> full_logits(std::span<const std::int64_t> tokens) const;

 private:
  void attention(KvCache& cache, std::int64_t layer, const float* qkv, float* context,
                 std::int64_t count) const;

  model::ModelOptions options_;
  const model::ParamBuffer* params_;
  std::size_t word_, position_, final_ln_weight_, final_ln_bias_;
  std::vector<model::LayerParamIndex> layers_;
};

}  // namespace mds::tasks
