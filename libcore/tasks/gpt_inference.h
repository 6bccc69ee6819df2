// Inference forward of the GPT model (fp32, no dropout) that returns logits and keeps each
// layer's keys and values in a cache, so that decoding one more token costs one position instead
// of the whole prefix (upstream's generation recomputes nothing either unless --recompute). The
// math is the training forward's (model/transformer_layer.h) with attention over the cached
// positions. In a T × P grid (InferenceComms) each rank runs its TP shard of its pipeline stage as
// training does: column-parallel QKV and h→4h on its heads, row-parallel dense and 4h→h summed
// over the TP group, the vocab-parallel embedding summed, hidden states sent from stage to stage,
// and on the last stage the vocab-parallel logits gathered over the TP group.
//
// The forward is the public ops (ops::layernorm_forward, linear_forward, the decode attention …)
// on the tensors of a workspace arena on the DeviceContext's device, the host or one CUDA device,
// with the cache there too; only the token ids go over and the logits come back. On a device the
// TP sums and the hidden states between stages are device tensors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/model_options.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/tensor_parallel.h"
#include "model/transformer_layer.h"
#include "ops/device_context.h"
#include "tasks/inference_comms.h"
#include "tensor/buffer.h"

namespace mds::tasks {

// Keys and values of the stage's layers and this TP rank's heads (the config's stage range and
// TP rank) for `batch` rows and up to `capacity` positions, all rows at the same length, on
// `device` (the GptInference's).
class KvCache {
 public:
  KvCache(const model::GptConfig& config, std::int64_t batch, std::int64_t capacity,
          tensor::Device device = {});
  std::int64_t batch() const { return batch_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t length() const { return length_; }
  tensor::Device device() const { return data_.device(); }
  void clear() { length_ = 0; }

 private:
  friend class GptInference;
  // [batch, local heads, capacity, head_dim] of one layer of the stage (0 = its first).
  tensor::Tensor keys(std::int64_t layer) const;
  tensor::Tensor values(std::int64_t layer) const;

  std::int64_t layers_, heads_, head_dim_, batch_, capacity_;
  std::int64_t length_ = 0;
  tensor::Buffer data_;  // all keys, then all values
};

class GptInference {
 public:
  // `params` (fp32, laid out by `table`: the TP shard and stage of options.config) must outlive
  // this object, as must the communicators of `comms`, whose grid must be the config's. Dropout
  // settings are ignored. `device` (null: the host) says where the forward runs; params must be
  // on its device, and on a CUDA device the head dim must have a decode-attention kernel;
  // otherwise this fails with one line. In a T × P grid on a device the TP and PP groups must
  // move device tensors (dist/device_communicators.h; MPI's refuse them with one line); the logits
  // are gathered on the host.
  GptInference(const model::ModelOptions& options, const model::ParamTable& table,
               const model::ParamBuffer& params, const InferenceComms& comms = {},
               const ops::DeviceContext* device = nullptr);
  ~GptInference();
  GptInference(const GptInference&) = delete;
  GptInference& operator=(const GptInference&) = delete;

  const model::ModelOptions& options() const { return options_; }
  const InferenceComms& comms() const { return comms_; }
  tensor::Device device() const { return context().device(); }
  std::int64_t padded_vocab_size() const { return options_.config.padded_vocab_size; }
  // Whether forward returns logits: the last pipeline stage (each of its TP ranks).
  bool has_logits() const { return comms_.last_stage(); }

  // A cache on this model's device for `batch` rows of up to `capacity` positions.
  KvCache make_cache(std::int64_t batch, std::int64_t capacity) const;

  // Feeds `count` new tokens per row (tokens: [cache.batch(), count] row-major, the same on every
  // rank of the grid, which all call this together) at positions cache.length() ..
  // cache.length() + count − 1, appends their keys and values to the cache, and returns the
  // logits of each row's last `logits_count` new positions: [batch, logits_count, padded_vocab]
  // row-major on the last stage (on the host, wherever the model runs), empty on the others.
  // Fails when the cache or the position embeddings have no room for the tokens, or when the
  // cache is on another device.
  std::vector<float> forward(KvCache& cache, std::span<const std::int64_t> tokens,
                             std::int64_t count, std::int64_t logits_count = 1) const;

  // Logits of every position of one sequence, without a cache: [tokens.size(), padded_vocab]
  // (empty on all but the last stage).
  std::vector<float> full_logits(std::span<const std::int64_t> tokens) const;

 private:
  struct Workspace;

  const ops::DeviceContext& context() const { return device_ != nullptr ? *device_ : host_; }
  void check_device() const;
  void check_tokens(std::span<const std::int64_t> tokens) const;
  // The workspace for `tokens` rows through the layers and `head_rows` through the head, grown
  // (re-planned, at least doubling) when a call needs more than the last one planned.
  Workspace& workspace(std::int64_t tokens, std::int64_t head_rows) const;
  void stage_indices(Workspace& ws, std::span<const std::int64_t> tokens, std::int64_t rows,
                     std::int64_t count, std::int64_t past, std::int64_t logits_count) const;
  void embed(const Workspace& ws, std::int64_t n) const;
  void layer_forward(const Workspace& ws, KvCache& cache, std::size_t index, std::int64_t n,
                     std::int64_t count) const;
  std::vector<float> head(const Workspace& ws, std::int64_t n, std::int64_t m) const;

  model::ModelOptions options_;
  const model::ParamBuffer* params_;
  InferenceComms comms_;
  model::TensorParallel tp_;
  const ops::DeviceContext* device_;  // null: host_
  ops::DeviceContext host_;
  bool owns_embedding_, owns_head_;
  std::int64_t first_layer_;
  std::size_t word_ = 0, position_ = 0, final_ln_weight_ = 0, final_ln_bias_ = 0;
  std::size_t embed_norm_weight_ = 0, embed_norm_bias_ = 0;  // with --embed-layernorm
  // ALiBi: [local heads, max_position_embeddings] on the model's device (model/alibi.h).
  tensor::Buffer alibi_bias_;
  tensor::Tensor alibi_bias() const;
  std::vector<model::LayerParamIndex> layers_;  // the stage's, from first_layer_
  // Scratch of the last forward, reused by the next (one thread drives a GptInference).
  mutable std::unique_ptr<Workspace> workspace_;
};

}  // namespace mds::tasks
