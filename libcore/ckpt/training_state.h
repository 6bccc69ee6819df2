// What a training checkpoint holds, as views into the trainer's own buffers: saving reads them,
// loading writes into them. One rank's share of a TP×PP×DP run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/pickle_value.h"
#include "model/param_table.h"
#include "tensor/tensor.h"
#include "train/loss_scaler.h"
#include "train/lr_schedule.h"
#include "train/zero_partition.h"

namespace mds::ckpt {

// Which optimizer wrapper DeepSpeed would have used (training.md §4.1); it decides the files.
enum class OptimizerLayout {
  kFp32,       // fp32, ZeRO 0: base FusedAdam state_dict in mp_rank_00's "optimizer" (per-param)
  kFp16,       // fp16, ZeRO 0: FP16_Optimizer state in mp_rank_00's "optimizer" (§2.6)
  kFp16Zero1,  // fp16, ZeRO 1 or 2: zero_pp_rank_D_mp_rank_TT_optim_states.pt
               // (DeepSpeedZeroOptimizer)
  kBf16,       // bf16, ZeRO 0: bf16_zero_pp_rank_D_mp_rank_TT_optim_states.pt (BF16_Optimizer)
  kFp32Zero,   // fp32, ZeRO 1 or 2: zero_pp_rank_D_… (DeepSpeedZeroOptimizer over fp32 weights)
};

std::string_view layout_name(OptimizerLayout layout);  // "fp32", "fp16", "fp16-zero1", "bf16"
// The dtype of the 16-bit (or fp32) model weights the layout implies.
tensor::DType params_dtype(OptimizerLayout layout);
// Whether the optimizer state lives in a zero_pp_rank file (ZeRO 1/2 or BF16_Optimizer), i.e. is
// partitioned over the data-parallel ranks.
bool has_zero_file(OptimizerLayout layout);
// Whether that file holds DeepSpeedZeroOptimizer's state (not BF16_Optimizer's).
bool is_zero_optimizer(OptimizerLayout layout);

// apex FusedAdam's per-group hyperparameters (one value for every group but weight_decay).
struct AdamHyper {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // of the decay groups; the no-decay group saves 0.0
};

// Where the rank sits in the grid: it decides the file names (checkpoints.md §2.1).
struct CheckpointRanks {
  std::int64_t tp = 0, pp = 0, dp = 0;
  std::int64_t tp_size = 1, pp_size = 1, dp_size = 1;
  // DeepSpeed's rank in the model-parallel group (the mp_rank_XX of the files) and its size.
  std::int64_t mp_rank() const { return pp * tp_size + tp; }
  std::int64_t mp_size() const { return pp_size * tp_size; }
};

struct TrainingState {
  CheckpointRanks ranks;
  const model::ParamTable* table = nullptr;
  tensor::Tensor params;  // flat, table layout, params dtype (fp32 / fp16 / bf16)
  // fp32 master weights (unused for kFp32) and Adam moments: flat table-layout buffers, or for
  // the layouts with a ZeRO file this rank's partitions back to back as `zero` lays them out.
  tensor::Tensor master;
  tensor::Tensor exp_avg;
  tensor::Tensor exp_avg_sq;
  OptimizerLayout layout = OptimizerLayout::kFp32;
  // The partitions over ranks.dp_size ranks (required with a ZeRO file; built on `table`).
  const train::ZeroLayout* zero = nullptr;
  std::int64_t zero_stage = 1;  // DeepSpeedZeroOptimizer's zero_stage (1 or 2)
  // Rotary models carry the persistent `self_attention.rotary_emb.inv_freq` buffer ([hn/2]) in
  // every transformer layer file; set this to hn for them, leave 0 otherwise.
  std::int64_t rotary_head_dim = 0;

  std::int64_t adam_step = 0;  // apex keeps `step` per param group, equal in every group
  AdamHyper adam;              // lr = the current LR
  double clip_grad = 0;
  train::LossScalerState loss_scaler;  // fp16 layouts only
  train::LrSchedulerState lr_scheduler;

  std::int64_t iteration = 0;
  std::int64_t global_steps = 0;  // names the tag: global_step<global_steps>
  std::int64_t global_samples = 0;
  std::int64_t skipped_steps = 0;
  std::int64_t consumed_train_samples = 0;
  std::int64_t consumed_valid_samples = 0;
  std::int64_t consumed_train_tokens = 0;
  std::int64_t padded_vocab_size = 0;
  std::int64_t original_vocab_size = 0;
  std::uint64_t seed = 1234;  // --seed: the saved RNG states are the freshly seeded ones

  // argparse.Namespace built by the caller (none: an empty one). The writer sets its iteration,
  // consumed_train_samples, consumed_valid_samples and consumed_train_tokens.
  io::Value args;
  io::Value ds_config;  // the DeepSpeed JSON config as a dict
};

struct SaveOptions {
  bool save_optimizer = true;  // false: no optimizer state at all (a weights-only checkpoint)
  bool save_rng = true;
  // Where torch.load would put the tensors without map_location; upstream files say "cuda:N",
  // which a machine without CUDA cannot load without one.
  std::string storage_location = "cpu";
};

struct LoadOptions {
  bool load_optimizer = true;  // --no-load-optim: keep the caller's moments, step, scaler
  bool load_rng = true;        // --no-load-rng
  bool finetune = false;       // --finetune: iteration 0, tokens and RNG not restored
  // Only the model weights (evaluate, generate): no ZeRO file, no masters, any DP size.
  bool weights_only = false;
  // A universal checkpoint's folder: only the client state of an mp_rank file (counters, LR
  // scheduler, args) — this rank's when the grid has as many, else mp_rank_00 (checkpoints.md
  // §3.4); weights and optimizer state come from zero/ (ckpt/resume_universal.h).
  bool client_state_only = false;
  // false: the layer files are not read and `params` is left as it is (convert-to-universal-
  // checkpoint takes the weights from the fp32 masters of the optimizer state).
  bool load_weights = true;
};

// What the checkpoint says about the run that wrote it, for the caller's consistency checks.
struct LoadedCheckpoint {
  io::Value args;       // the saved argparse.Namespace
  io::Value ds_config;  // the saved DeepSpeed config dict
  std::string ds_version;
  // What DeepSpeed would have logged as a warning while loading (one line each).
  std::vector<std::string> warnings;
};

// Fails naming the buffer unless the table is set and params (and master, exp_avg, exp_avg_sq
// where asked for) are host tensors of the table's buffer size and the layout's dtypes. `who`
// starts the message ("saving checkpoint", ...).
void check_state_buffers(const TrainingState& state, bool need_master, bool need_moments,
                         std::string_view who);

}  // namespace mds::ckpt
