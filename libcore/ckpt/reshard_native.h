// Megatron-native checkpoints (checkpoints.md §1) as an input of merge-mp-partitions: the tracker
// file, iter_XXXXXXX/mp_rank_TT[_PPP]/model_optim_rng.pt per (tp, pp), and the `model` tree with
// stage-local layer numbers, read into the same per-TP-rank tables as a DeepSpeed checkpoint.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "ckpt/reshard_source.h"

namespace mds::ckpt {

inline constexpr const char* kMegatronTracker = "latest_checkpointed_iteration.txt";

// "iter_0001500" for the tracker text "1500" (surrounding white space ignored), "release" for
// "release"; anything else fails naming `tracker_path`.
std::string megatron_tag(const std::string& tracker_text, const std::string& tracker_path);

// "mp_rank_01" (P = 1) or "mp_rank_01_003" (P > 1): the folder of rank (tp, pp).
std::string megatron_rank_folder(std::int64_t tp, std::int64_t pp, std::int64_t pp_size);

// (spec index, layer-file key) of a parameter of the language model's state dict, named by its
// dotted path below `language_model` ("embedding.word_embeddings.weight",
// "encoder.layers.1.mlp.dense_4h_to_h.bias", "encoder.final_layernorm.weight"), on stage `pp` of a
// model of `num_layers` layers cut into `pp_size` equal stages; nullopt for anything else.
std::optional<std::pair<std::int64_t, std::string>> megatron_param_spec(const std::string& path,
                                                                        std::int64_t pp,
                                                                        std::int64_t pp_size,
                                                                        std::int64_t num_layers);

// inspect_source_checkpoint for a folder with a Megatron tracker holding `tracker_text`.
SourceCheckpoint inspect_megatron_checkpoint(const std::string& dir,
                                             const std::string& tracker_text);

// Fails naming the first model_optim_rng.pt of the T × P grid that is missing.
void check_megatron_files(const SourceCheckpoint& source);

// Reads TP rank `tp` of every pipeline stage into `shard` (the whole model's table of that rank, in
// the source's dtype): every parameter must be found once with its shape and dtype, and nothing
// else may be in the tree (the last stage's word_embeddings_for_head copy is skipped). With
// `counters`, also the iteration, tokens, consumed samples and LR scheduler of stage 0's file.
void load_megatron_shard(const SourceCheckpoint& source, std::int64_t tp, std::int64_t num_layers,
                         const model::ParamBuffer& shard, TrainingState* counters);

}  // namespace mds::ckpt
