// The output of merge-mp-partitions: a weights-only DeepSpeed pipeline checkpoint at the target
// TP × PP grid (checkpoints.md §2), one data-parallel rank, written as pretrain's ranks would
// write it, so that pretrain --finetune (at that grid), evaluate and generate load it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "ckpt/reshard_source.h"
#include "model/gpt_config.h"
#include "model/param_buffer.h"

namespace mds::ckpt {

struct TargetGrid {
  std::int64_t tp_size = 1;
  std::int64_t pp_size = 1;
  std::vector<std::int64_t> parts;  // pp_size + 1 spec boundaries (model::pipeline_partition)
  std::optional<std::string> partition_method;  // recorded in the args when given
};

// Checks that grid.tp_size divides the heads, the FFN width and the padded vocabulary of the whole
// model `config`, and cuts it into grid.pp_size stages by grid.partition_method (default
// type:transformer) as pretrain cuts them (`sixteen_bit`: the run's weights are fp16/bf16), filling
// grid.parts; a stage without a layer is refused. Errors name the target flags.
void plan_target_grid(const model::GptConfig& config, bool sixteen_bit, TargetGrid& grid);

// The saved args of rank (pp, tp) of the target grid: the source's Namespace with
// tensor_model_parallel_size, pipeline_model_parallel_size, padded_vocab_size, world_size (T'·P'),
// data_parallel_size (1), rank (pp·T' + tp) and, when given, pp_partition_method replaced.
io::Value target_args(const io::Value& saved, const TargetGrid& grid,
                      std::int64_t padded_vocab_size, std::int64_t pp, std::int64_t tp);

// Writes <dir>/<source.output_tag>/ (every (spec, tp) layer file and every mp_rank_{pp·T'+tp} file,
// with the source's counters, LR scheduler and DeepSpeed config, no optimizer state and no ZeRO
// file, RNG states as Megatron seeds them) under a temporary name, renames it into place, then
// writes <dir>/latest. `full` is the unsharded fp32 model at the target's padded vocabulary,
// `config` its shape; weights are written in the source's dtype.
void write_target_checkpoint(const std::string& dir, const model::ParamBuffer& full,
                             const model::GptConfig& config, const TargetGrid& grid,
                             const SourceCheckpoint& source, const MergedSource& merged,
                             const base::Log& log);

}  // namespace mds::ckpt
