#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/gpt_config.h"
#include "tensor/shape.h"

namespace mds::model {

// How the unsharded tensor is cut across TP ranks (training.md §2.2).
enum class TpSplit : std::uint8_t {
  kReplicated,  // every rank holds the whole tensor
  kColumn,      // ColumnParallel: dim 0 contiguous (whole heads for QKV)
  kRow,         // RowParallel weight: dim 1 contiguous
  kVocab,       // VocabParallelEmbedding: dim 0 contiguous
};

// Optimizer parameter groups in upstream order (training.md §4.2). Empty groups are dropped
// by DeepSpeed, so a stage's group *index* in a checkpoint may differ from this enum.
enum class DecayGroup : std::uint8_t { kDecayFirstHalf = 0, kDecaySecondHalf = 1, kNoDecay = 2 };
inline constexpr int kNumDecayGroups = 3;

enum class InitKind : std::uint8_t {
  kNormal,        // N(0, σ)
  kScaledNormal,  // N(0, σ/sqrt(2L)): attention dense and dense_4h_to_h weights
  kOnes,          // LayerNorm weights
  kZeros,         // biases
};

struct ParamSpec {
  std::string name;    // the key inside the layer file, e.g. "self_attention.dense.weight"
  std::int64_t layer;  // pipeline spec index: the `layer_XX` of the layer file
  tensor::Shape full_shape;
  tensor::Shape local_shape;  // this TP rank's shard
  TpSplit split;
  DecayGroup group;
  InitKind init;
  double init_std;  // σ for kNormal, σ/sqrt(2L) for kScaledNormal, 0 otherwise
  // The last stage's copy of the tied embedding module (training.md §3.2): not saved in layer
  // files, excluded from gradient norms, and not counted in the model's full size.
  bool tied_replica = false;
  std::int64_t offset = 0;  // element offset in the rank's flat buffer (see ParamTable)

  std::int64_t local_numel() const { return local_shape.numel(); }
  std::int64_t full_numel() const { return full_shape.numel(); }
  // The name DeepSpeed's engine and optimizer use: "<spec>.<key>" or "tied_modules.embed.<key>".
  std::string engine_name() const;
};

// The parameters one rank holds, in upstream registration order (pre-order module traversal:
// tied embedding first, then specs in increasing index), with their places in a flat buffer.
class ParamTable {
 public:
  // Each parameter starts on a multiple of this many elements, so every view is 64-byte aligned
  // for any dtype of at least one byte.
  static constexpr std::int64_t kAlignElements = 64;

  static ParamTable build(const GptConfig& config);

  const std::vector<ParamSpec>& params() const { return params_; }
  std::size_t size() const { return params_.size(); }
  const ParamSpec& operator[](std::size_t index) const { return params_[index]; }

  // Index of the parameter `name` of spec `layer`, or nullopt.
  std::optional<std::size_t> find(std::int64_t layer, std::string_view name) const;
  // As find, but fails with the missing name.
  std::size_t index_of(std::int64_t layer, std::string_view name) const;

  std::int64_t local_numel() const;  // sum of local shapes (no padding)
  std::int64_t full_numel() const;   // sum of full shapes, replicas excluded
  // Elements the flat buffer needs, alignment padding included.
  std::int64_t buffer_numel() const { return buffer_numel_; }
  // The buffer holds groups one after another (decay halves, then no-decay), so each group is
  // one slice [begin, end) of it, as DeepSpeed's per-group flat buffers (training.md §4.3).
  std::int64_t group_begin(DecayGroup group) const { return group_begin_[static_cast<int>(group)]; }
  std::int64_t group_end(DecayGroup group) const {
    return group_begin_[static_cast<int>(group) + 1];
  }
  // This rank's position in its TP group (GptConfig::tp_rank).
  std::int64_t tp_rank() const { return tp_rank_; }
  // Whether the parameter's gradient counts in this rank's share of the global norm: TP
  // duplicates (replicated parameters) count on TP rank 0 only (training.md §5.3).
  bool counts_in_norm(const ParamSpec& param) const {
    return param.split != TpSplit::kReplicated || tp_rank_ == 0;
  }
  // Spec indices of the layer files this rank writes, in increasing order.
  std::vector<std::int64_t> saved_layers() const;

 private:
  std::vector<ParamSpec> params_;
  std::int64_t buffer_numel_ = 0;
  std::int64_t tp_rank_ = 0;
  std::int64_t group_begin_[kNumDecayGroups + 1] = {};
};

// "layer_03-model_01-model_states.pt" (two digits, three once the index reaches 100).
std::string layer_file_name(std::int64_t layer, std::int64_t tp_rank);

// Closed-form parameter count of the unsharded model (embedding, L layers, final LayerNorm).
std::int64_t expected_full_parameter_count(const GptConfig& config);

}  // namespace mds::model
