#include "model/param_table.h"

#include <cmath>
#include <cstdio>

#include "base/error.h"

namespace mds::model {
namespace {

using tensor::Shape;

std::int64_t align_up(std::int64_t value, std::int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

Shape local_shape_of(const Shape& full, TpSplit split, std::int64_t tp) {
  Shape local = full;
  switch (split) {
    case TpSplit::kReplicated:
      break;
    case TpSplit::kColumn:
    case TpSplit::kVocab:
      local[0] = full[0] / tp;
      break;
    case TpSplit::kRow:
      local[1] = full[1] / tp;
      break;
  }
  return local;
}

// Appends parameters in registration order. Whether a parameter is weight-decayed is decided
// here by the upstream rule (LayerNorm params and biases are not; everything else is), and
// later turned into one of the three groups once the stage's decay list is complete.
class Builder {
 public:
  explicit Builder(const GptConfig& config)
      : config_(config),
        scaled_std_(config.init_method_std /
                    std::sqrt(2.0 * static_cast<double>(config.num_layers))) {}

  void linear(std::int64_t layer, const std::string& prefix, Shape weight, TpSplit split,
              bool scaled) {
    add(layer, prefix + ".weight", weight, split,
        scaled ? InitKind::kScaledNormal : InitKind::kNormal, true);
    // A row-parallel bias is added after the all-reduce, so every rank holds all of it.
    const TpSplit bias_split = split == TpSplit::kColumn ? TpSplit::kColumn : TpSplit::kReplicated;
    add(layer, prefix + ".bias", Shape{weight[0]}, bias_split, InitKind::kZeros, false);
  }

  void layernorm(std::int64_t layer, const std::string& prefix) {
    const std::string dot = prefix.empty() ? "" : prefix + ".";
    add(layer, dot + "weight", Shape{config_.hidden_size}, TpSplit::kReplicated, InitKind::kOnes,
        false);
    add(layer, dot + "bias", Shape{config_.hidden_size}, TpSplit::kReplicated, InitKind::kZeros,
        false);
  }

  void embedding(bool replica) {
    const std::int64_t h = config_.hidden_size;
    const std::int64_t spec = GptConfig::kEmbeddingSpec;
    add(spec, "word_embeddings.weight", Shape{config_.padded_vocab_size, h}, TpSplit::kVocab,
        InitKind::kNormal, true, replica);
    // Only the first stage's module owns the embedding LayerNorm (training.md §1.2 step 4, §3.2).
    if (config_.embed_layernorm && !replica) layernorm(spec, "word_embeddings.norm");
    if (config_.position_embedding == PositionEmbedding::kAbsolute) {
      add(spec, "position_embeddings.weight", Shape{config_.max_position_embeddings, h},
          TpSplit::kReplicated, InitKind::kNormal, true, replica);
    }
  }

  void transformer_layer(std::int64_t layer) {
    const std::int64_t h = config_.hidden_size;
    const std::int64_t f = config_.ffn();
    const std::int64_t spec = GptConfig::layer_spec(layer);
    layernorm(spec, "input_layernorm");
    linear(spec, "self_attention.query_key_value", Shape{3 * h, h}, TpSplit::kColumn, false);
    linear(spec, "self_attention.dense", Shape{h, h}, TpSplit::kRow, true);
    layernorm(spec, "post_attention_layernorm");
    linear(spec, "mlp.dense_h_to_4h", Shape{config_.glu ? 2 * f : f, h}, TpSplit::kColumn, false);
    linear(spec, "mlp.dense_4h_to_h", Shape{h, f}, TpSplit::kRow, true);
  }

  std::vector<ParamSpec> take_params() { return std::move(params_); }
  const std::vector<bool>& decays() const { return decays_; }

 private:
  void add(std::int64_t layer, std::string name, Shape full, TpSplit split, InitKind init,
           bool decay, bool replica = false) {
    ParamSpec spec;
    spec.name = std::move(name);
    spec.layer = layer;
    spec.full_shape = full;
    spec.local_shape = local_shape_of(full, split, config_.tensor_parallel_size);
    spec.split = split;
    spec.group = DecayGroup::kNoDecay;
    spec.init = init;
    spec.init_std = init == InitKind::kNormal         ? config_.init_method_std
                    : init == InitKind::kScaledNormal ? scaled_std_
                                                      : 0.0;
    spec.tied_replica = replica;
    params_.push_back(std::move(spec));
    decays_.push_back(decay);
  }

  const GptConfig& config_;
  double scaled_std_;
  std::vector<ParamSpec> params_;
  std::vector<bool> decays_;
};

}  // namespace

std::string ParamSpec::engine_name() const {
  if (layer == GptConfig::kEmbeddingSpec) return "tied_modules.embed." + name;
  return std::to_string(layer) + "." + name;
}

ParamTable ParamTable::build(const GptConfig& config) {
  validate(config);
  Builder builder(config);
  // Tied modules are registered before the numbered specs, so they come first in pre-order.
  if (config.stage_owns(GptConfig::kEmbeddingSpec)) {
    builder.embedding(false);
  } else if (config.stage_owns(config.head_spec())) {
    builder.embedding(true);
  }
  for (std::int64_t layer = 0; layer < config.num_layers; ++layer) {
    if (config.stage_owns(GptConfig::layer_spec(layer))) builder.transformer_layer(layer);
  }
  if (config.stage_owns(config.final_layernorm_spec()))
    builder.layernorm(config.final_layernorm_spec(), "");

  ParamTable table;
  table.params_ = builder.take_params();
  table.tp_rank_ = config.tp_rank;
  const std::vector<bool>& decays = builder.decays();

  // The decay list is split at len//2 to work around an apex multi-tensor limit (§4.2).
  std::size_t decay_count = 0;
  for (bool decay : decays) decay_count += decay ? 1 : 0;
  std::size_t decay_seen = 0;
  for (std::size_t i = 0; i < table.params_.size(); ++i) {
    if (!decays[i]) continue;
    table.params_[i].group =
        decay_seen < decay_count / 2 ? DecayGroup::kDecayFirstHalf : DecayGroup::kDecaySecondHalf;
    ++decay_seen;
  }

  std::int64_t cursor = 0;
  for (int g = 0; g < kNumDecayGroups; ++g) {
    table.group_begin_[g] = cursor;
    for (ParamSpec& param : table.params_) {
      if (static_cast<int>(param.group) != g) continue;
      param.offset = cursor;
      cursor = align_up(cursor + param.local_numel(), kAlignElements);
    }
  }
  table.group_begin_[kNumDecayGroups] = cursor;
  table.buffer_numel_ = cursor;

  const bool whole_model = config.stage_owns(GptConfig::kEmbeddingSpec) &&
                           config.stage_owns(config.final_layernorm_spec());
  if (whole_model && table.full_numel() != expected_full_parameter_count(config)) {
    base::fail("ParamTable: the table holds ", table.full_numel(),
               " parameters but the closed form gives ", expected_full_parameter_count(config));
  }
  return table;
}

std::optional<std::size_t> ParamTable::find(std::int64_t layer, std::string_view name) const {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].layer == layer && params_[i].name == name) return i;
  }
  return std::nullopt;
}

std::size_t ParamTable::index_of(std::int64_t layer, std::string_view name) const {
  const std::optional<std::size_t> index = find(layer, name);
  if (!index) base::fail("ParamTable: no parameter '", name, "' in layer ", layer, " on this rank");
  return *index;
}

std::int64_t ParamTable::local_numel() const {
  std::int64_t total = 0;
  for (const ParamSpec& param : params_) total += param.local_numel();
  return total;
}

std::int64_t ParamTable::full_numel() const {
  std::int64_t total = 0;
  for (const ParamSpec& param : params_) total += param.tied_replica ? 0 : param.full_numel();
  return total;
}

std::vector<std::int64_t> ParamTable::saved_layers() const {
  std::vector<std::int64_t> layers;
  for (const ParamSpec& param : params_) {
    if (!param.tied_replica && (layers.empty() || layers.back() != param.layer))
      layers.push_back(param.layer);
  }
  return layers;
}

std::string layer_file_name(std::int64_t layer, std::int64_t tp_rank) {
  char name[64];
  std::snprintf(name, sizeof name, "layer_%02lld-model_%02lld-model_states.pt",
                static_cast<long long>(layer), static_cast<long long>(tp_rank));
  return name;
}

std::int64_t expected_full_parameter_count(const GptConfig& c) {
  const std::int64_t h = c.hidden_size;
  const std::int64_t f = c.ffn();
  const std::int64_t f_in = c.glu ? 2 * f : f;
  std::int64_t embedding = c.padded_vocab_size * h;
  if (c.embed_layernorm) embedding += 2 * h;
  if (c.position_embedding == PositionEmbedding::kAbsolute)
    embedding += c.max_position_embeddings * h;
  // Two LayerNorms, QKV, attention dense, and the two MLP linears, each with its bias.
  const std::int64_t layer =
      2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (f_in * h + f_in) + (f * h + h);
  return embedding + c.num_layers * layer + 2 * h;
}

}  // namespace mds::model
