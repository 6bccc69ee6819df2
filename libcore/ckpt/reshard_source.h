// The input of merge-mp-partitions: a DeepSpeed pipeline checkpoint as pretrain --save writes it
// (checkpoints.md §2) at any TP × PP × DP grid, or a Megatron-native one (§1, reshard_native.h),
// read for its weights only (ZeRO files are not opened) and merged into the unsharded model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "base/log.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "model/gpt_config.h"
#include "model/param_buffer.h"

namespace mds::ckpt {

// What the source's first model file (and first layer file) say about it.
struct SourceCheckpoint {
  // DeepSpeed pipeline layout (`latest`, layer files) or Megatron-native (§1: the tracker
  // latest_checkpointed_iteration.txt, iter_XXXXXXX/mp_rank_TT[_PPP]/model_optim_rng.pt).
  enum class Format { kDeepSpeed, kMegatron };
  Format format = Format::kDeepSpeed;
  std::string dir;         // --load
  std::string tag;         // from <dir>/latest ("iter_0001500" or "release" for Megatron)
  std::string folder;      // <dir>/<tag>
  std::string output_tag;  // the DeepSpeed tag to write: the same, or global_step<iteration>
  std::int64_t tp_size = 1;
  std::int64_t pp_size = 1;
  tensor::DType dtype = tensor::DType::kFloat32;  // of the weights in the layer files
  // The optimizer wrapper the run used, as far as the model files show it (whether they list
  // param_shapes); the output keeps the same kind so that the same configuration finetunes it.
  OptimizerLayout layout = OptimizerLayout::kFp32;
  std::int64_t padded_vocab_size = 0;    // checkpoint_info.padded_vocab_size
  std::int64_t original_vocab_size = 0;  // checkpoint_info.original_vocab_size
  io::Value args;                        // the saved argparse.Namespace
};

// Reads <dir>/latest, mp_rank_00_model_states.pt and layer_01-model_00-model_states.pt — or, when
// there is no `latest` but a Megatron tracker, the first rank's model_optim_rng.pt. A missing
// tracker, folder or file, or args that contradict the file (mp_world_size ≠ T·P), fail with one
// line naming it.
SourceCheckpoint inspect_source_checkpoint(const std::string& dir);

// The optimizer wrapper a run with these weights used: BF16_Optimizer for bf16; for fp32 and fp16
// ZeRO when the model files list param_shapes (DeepSpeed writes them only for ZeRO and bf16).
OptimizerLayout source_layout(tensor::DType dtype, bool has_param_shapes);

// Fills args, tp_size, pp_size and the vocabulary sizes from a model file's root dict (its `args`
// Namespace and `checkpoint_info`); errors name the entry.
void read_source_args(const io::ValueRef& root, SourceCheckpoint& source);

// Fails naming the first missing file unless the folder holds every layer file of every TP rank
// (the whole model `config`: all pipeline stages lie in one folder under global spec indices) and
// every mp_rank file of the grid — for a Megatron-native source, every rank's model_optim_rng.pt.
void check_source_files(const SourceCheckpoint& source, const model::GptConfig& config);

// The unsharded model (fp32 at the source's padded vocabulary) and the run's client state.
struct MergedSource {
  std::unique_ptr<model::ParamTable> table;  // T = 1, whole model
  std::unique_ptr<model::ParamBuffer> weights;
  TrainingState counters;  // iteration, steps, samples, tokens, LR scheduler (no buffers)
  io::Value ds_config;
};

// Loads the weights of every TP rank (all its pipeline stages) for the model `config` (the source's
// shape and padded vocabulary; its TP and stage fields are ignored), checks that replicated
// parameters agree across TP ranks, and merges the shards.
MergedSource load_merged_source(const SourceCheckpoint& source, const model::GptConfig& config,
                                const base::Log& log);

}  // namespace mds::ckpt
