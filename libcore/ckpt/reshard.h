// merge-mp-partitions: re-partitions the weights of a DeepSpeed pipeline checkpoint for another
// tensor- and pipeline-parallel grid, in both directions (upstream tools/merge_mp_partitions.py
// and deepspeed_to_deepspeed.py, checkpoints.md §4.1, §4.4).
#pragma once

#include "base/log.h"
#include "ckpt/reshard_args.h"

namespace mds::ckpt {

// Reads the checkpoint in --load (its TP and PP sizes from its saved args), merges the TP shards
// of every pipeline stage into the unsharded model, re-pads the vocabulary for the target TP size,
// splits it for --target-tensor-model-parallel-size, cuts it into
// --target-pipeline-model-parallel-size stages by --pp-partition-method, and writes the result into
// --save. The model flags must describe the checkpoint (as pretrain's load checks them). Progress
// goes to `log`; any bad input is a base::Error naming the file or flag, with nothing written.
void merge_mp_partitions(MergeMpArgs& args, const base::Log& log);

}  // namespace mds::ckpt
