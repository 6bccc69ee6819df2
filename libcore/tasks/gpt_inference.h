// Inference forward of the GPT model (fp32, no dropout) that returns logits and keeps each
// layer's keys and values in a cache, so that decoding one more token costs one position instead
// of the whole prefix (upstream's generation recomputes nothing either unless --recompute). The
// math is the training forward's (model/transformer_layer.h) with attention over the cached
// positions. In a T × P grid (InferenceComms) each rank runs its TP shard of its pipeline stage as
// training does: column-parallel QKV and h→4h on its heads, row-parallel dense and 4h→h summed
// over the TP group, the vocab-parallel embedding summed, hidden states sent from stage to stage,
// and on the last stage the vocab-parallel logits gathered over the TP group.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/model_options.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/tensor_parallel.h"
#include "model/transformer_layer.h"
#include "tasks/inference_comms.h"

namespace mds::tasks {

// Keys and values of the stage's layers and this TP rank's heads (the config's stage range and
// TP rank) for `batch` rows and up to `capacity` positions, all rows at the same length.
class KvCache {
 public:
  KvCache(const model::GptConfig& config, std::int64_t batch, std::int64_t capacity);
  std::int64_t batch() const { return batch_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t length() const { return length_; }
  void clear() { length_ = 0; }

 private:
  friend class GptInference;
  // [capacity, head_dim] of one (stage layer, row, local head); values follow all keys.
  float* keys(std::int64_t layer, std::int64_t row, std::int64_t head);
  float* values(std::int64_t layer, std::int64_t row, std::int64_t head);

  std::int64_t layers_, heads_, head_dim_, batch_, capacity_;
  std::int64_t length_ = 0;
  std::vector<float> data_;
};

class GptInference {
 public:
  // `params` (fp32, laid out by `table`: the TP shard and stage of options.config) must outlive
  // this object, as must the communicators of `comms`, whose grid must be the config's. Dropout
  // settings are ignored.
  GptInference(const model::ModelOptions& options, const model::ParamTable& table,
               const model::ParamBuffer& params, const InferenceComms& comms = {});

  const model::ModelOptions& options() const { return options_; }
  const InferenceComms& comms() const { return comms_; }
  std::int64_t padded_vocab_size() const { return options_.config.padded_vocab_size; }
  // Whether forward returns logits: the last pipeline stage (each of its TP ranks).
  bool has_logits() const { return comms_.last_stage(); }

  // Feeds `count` new tokens per row (tokens: [cache.batch(), count] row-major, the same on every
  // rank of the grid, which all call this together) at positions cache.length() ..
  // cache.length() + count − 1, appends their keys and values to the cache, and returns the
  // logits of each row's last `logits_count` new positions: [batch, logits_count, padded_vocab]
  // row-major on the last stage, empty on the others. Fails when the cache or the position
  // embeddings have no room for the tokens.
  std::vector<float> forward(KvCache& cache, std::span<const std::int64_t> tokens,
                             std::int64_t count, std::int64_t logits_count = 1) const;

  // Logits of every position of one sequence, without a cache: [tokens.size(), padded_vocab]
  // (empty on all but the last stage).
  std::vector<float> full_logits(std::span<const std::int64_t> tokens) const;

 private:
  void attention(KvCache& cache, std::int64_t layer, const float* qkv, float* context,
                 std::int64_t count) const;
  std::vector<float> head(const std::vector<float>& x, std::int64_t rows, std::int64_t count,
                          std::int64_t logits_count) const;

  model::ModelOptions options_;
  const model::ParamBuffer* params_;
  InferenceComms comms_;
  model::TensorParallel tp_;
  bool owns_embedding_, owns_head_;
  std::int64_t first_layer_;
  std::size_t word_ = 0, position_ = 0, final_ln_weight_ = 0, final_ln_bias_ = 0;
  std::vector<model::LayerParamIndex> layers_;  // the stage's, from first_layer_
};

}  // namespace mds::tasks
