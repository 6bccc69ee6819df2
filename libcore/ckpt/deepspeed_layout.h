// Where DeepSpeed puts things in a pipeline checkpoint: file names of each rank (checkpoints.md
// §2.1) and the optimizer's flat parameter groups of a data-parallel group of one rank
// (training.md §4.2-4.3).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/training_state.h"
#include "model/param_table.h"

namespace mds::ckpt {

// The DeepSpeed release whose files these are.
inline constexpr std::string_view kDeepSpeedVersion = "0.8.3";

std::string tag_for_step(std::int64_t global_steps);  // "global_step1500"
// "mp_rank_03_model_states.pt": one per (pp, tp), written by DP rank 0.
std::string model_states_file_name(std::int64_t mp_rank);
// "zero_pp_rank_1_mp_rank_03_optim_states.pt" (kFp16Zero1; "pp_rank" is the DP rank),
// "bf16_zero_pp_rank_…" (kBf16); empty for layouts that keep their optimizer state in the
// model-states file.
std::string zero_file_name(OptimizerLayout layout, std::int64_t dp_rank = 0,
                           std::int64_t mp_rank = 0);

// One param group of the optimizer: a non-empty DecayGroup of the table (DeepSpeed drops empty
// ones, so group indices in files count only the non-empty groups).
struct OptimizerGroup {
  model::DecayGroup group;
  std::vector<std::size_t> params;  // table indices in flat-buffer order
  std::int64_t numel = 0;           // the parameters back to back, no padding
  // The flat 16-bit buffer of BF16_Optimizer and ZeRO: numel rounded up to 2·D elements.
  std::int64_t aligned_numel = 0;

  bool decay() const { return group != model::DecayGroup::kNoDecay; }
};

std::vector<OptimizerGroup> optimizer_groups(const model::ParamTable& table);

// The group's parameters copied out of a table-layout fp32 buffer (64-element gaps between
// parameters) into `packed` (group.numel elements back to back), and back.
void pack_group(const model::ParamTable& table, const OptimizerGroup& group,
                const float* table_flat, float* packed);
void unpack_group(const model::ParamTable& table, const OptimizerGroup& group, const float* packed,
                  float* table_flat);

}  // namespace mds::ckpt
