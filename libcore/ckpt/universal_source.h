// The input of convert-to-universal-checkpoint: a DeepSpeed pipeline checkpoint as pretrain --save
// writes it (checkpoints.md §2), at any TP × PP × DP grid and in any optimizer layout. Everything
// the conversion needs is read from the files: the degrees, the layout, the model's shape (the
// saved args) and the pipeline stages (cut from the saved args as pretrain cuts them).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/training_state.h"
#include "io/pickle_value.h"
#include "model/gpt_config.h"

namespace mds::ckpt {

struct UniversalSource {
  std::string dir;     // the folder holding the tag folder (where `latest` is, when there is one)
  std::string tag;     // "global_step5"
  std::string folder;  // dir/tag
  bool tag_from_latest = false;  // --input_folder was the checkpoint root, the tag its `latest`
  std::int64_t tp_size = 1;
  std::int64_t pp_size = 1;
  std::int64_t dp_size = 1;  // dp_world_size: the ZeRO files per (pp, tp) of partitioned layouts
  OptimizerLayout layout = OptimizerLayout::kFp32;
  // The whole model (tensor_parallel_size T, rank 0, every spec); stage_config() cuts it.
  model::GptConfig config;
  std::vector<std::int64_t> parts;       // pp_size + 1 spec boundaries of the pipeline stages
  std::int64_t padded_vocab_size = 0;    // checkpoint_info.padded_vocab_size
  std::int64_t original_vocab_size = 0;  // checkpoint_info.original_vocab_size
  std::int64_t rotary_head_dim = 0;      // hn for rotary models (their layer files' buffer)
  // The ZeRO files carry the other precision's naming: a bf16 run's without the "bf16_" prefix
  // (as deepspeed_to_deepspeed.py writes them), or the reverse.
  bool other_zero_naming = false;

  // The ranks whose optimizer state is distinct: every DP rank for layouts with ZeRO files, DP
  // rank 0 alone otherwise (its mp_rank file holds the whole stage's state).
  std::int64_t optimizer_dp_ranks() const { return has_zero_file(layout) ? dp_size : 1; }
  // The shape of the parameters rank (pp, tp) holds.
  model::GptConfig stage_config(std::int64_t pp, std::int64_t tp) const;
  // "<folder>/mp_rank_03_model_states.pt" and the file holding rank (pp, tp, dp)'s optimizer
  // state (its ZeRO file, or its mp_rank file).
  std::string model_states_path(std::int64_t pp, std::int64_t tp) const;
  std::string optimizer_path(std::int64_t pp, std::int64_t tp, std::int64_t dp) const;
  // The name of the ZeRO file of (dp, mp rank), with the naming the folder uses.
  std::string zero_name(std::int64_t dp, std::int64_t mp) const;
};

// Reads --input_folder: a tag folder (it holds mp_rank_00_model_states.pt) or a checkpoint root
// (its `latest` names the tag). Checks that the folder holds exactly the files of its grid (T
// layer_01 files, P·T mp_rank files and, for partitioned layouts, D ZeRO files per mp rank, as the
// saved args and mp_rank_00's mp_world_size and dp_world_size say); the first missing or
// unexpected file, or a contradiction, fails with one line naming it.
UniversalSource inspect_universal_source(const std::string& input_folder);

// The model a saved argparse.Namespace describes (Megatron's num_layers, hidden_size, …), with
// the given padded vocabulary, T = 1 and every spec. Models the converter cannot merge (GLU MLPs,
// kv_channels other than hidden_size / heads) and missing or malformed attributes fail naming
// the attribute.
model::GptConfig config_from_saved_args(const io::ValueRef& args, std::int64_t padded_vocab_size);

}  // namespace mds::ckpt
