// convert-to-universal-checkpoint: a DeepSpeed pipeline checkpoint of any TP × PP × DP grid and
// optimizer layout into a universal checkpoint (checkpoints.md §3), in upstream v0.1's file
// format so that the fork's DeepSpeed 0.8.3 loads it, with v0.1's merge bugs fixed.
#pragma once

#include "base/log.h"
#include "ckpt/universal_args.h"

namespace mds::ckpt {

// Reads --input_folder (universal_source.h), extracts every rank's fp32 masters and Adam moments
// into a scratch folder with --num_extract_workers threads, merges each parameter over the DP and
// TP ranks with --num_merge_workers threads, and writes
//   <output>/zero/<engine name>/{fp32,exp_avg,exp_avg_sq}.pt   {"cat_dim"?, "param", …}
//   <output>/zero/optimizer_state.pt       the optimizer wrapper's scalars and param_groups
//   <output>/mp_rank_XX_model_states.pt    copied verbatim
// under a temporary name renamed into place when complete, then <output>/../latest_universal
// (the output folder's name). All files of the grid must agree on the iteration, the global step
// and Adam's step. Progress goes to `log`; bad input is a base::Error naming the file, with
// nothing left that looks like a checkpoint.
void convert_to_universal_checkpoint(const UniversalArgs& args, const base::Log& log);

}  // namespace mds::ckpt
