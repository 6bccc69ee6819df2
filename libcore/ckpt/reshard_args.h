// Command line of `merge-mp-partitions` (upstream tools/merge_mp_partitions.py, checkpoints.md
// §4.1): the whole Megatron flag registry describing the source model, as pretrain has it, plus the
// target grid.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/pretrain_args.h"

namespace mds::ckpt {

struct MergeMpArgs {
  config::PretrainArgs model;  // model and tokenizer flags, --load, --save, --pp-partition-method
  std::string model_type = "GPT";
  std::int64_t target_tensor_model_parallel_size = 1;
  std::int64_t target_pipeline_model_parallel_size = 1;
  // mds addition: write the merged model as a Hugging Face GPT-2 folder here instead of a
  // checkpoint in --save (docs/merge-mp-partitions.md).
  std::optional<std::string> to_hf;
  // mds addition: the source is this Hugging Face GPT-2 folder instead of --load; the model flags
  // not given are taken from its config.json (ckpt/hf_import.h).
  std::optional<std::string> from_hf;
};

// Parses like parse_pretrain_args: --help exits 0, a bad command line prints one
// "merge-mp-partitions: error: ..." line and exits 2. Nothing is validated yet.
MergeMpArgs parse_merge_mp_args(int argc, char** argv);

// The model-shape rules of arguments.py (validate_model_shape), --model-type GPT, --load (or
// --from-hf) and --save given and different, positive target sizes, at most one of --fp16/--bf16;
// fills the derived sizes. A violated rule is a base::Error naming the flag.
void validate_merge_mp_args(MergeMpArgs& args);

}  // namespace mds::ckpt
