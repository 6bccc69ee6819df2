// The DeepSpeed JSON configuration (--deepspeed_config) as the BigScience fork uses it
// (training.md §7). Parsing is strict: unknown keys, keys DeepSpeed knows but mds does not
// implement, wrong types, duplicates and invalid JSON are Errors that name the file and the key.
// Features left off (a block with enabled false, a false boolean) are accepted, as they do
// nothing in DeepSpeed either.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mds::config {

enum class CommDataType { kFp32, kFp16, kBf16 };
std::string_view to_string(CommDataType type);

struct Fp16Config {
  bool enabled = false;
  double loss_scale = 0.0;  // 0: dynamic; > 0: static scale
  int64_t initial_scale_power = 16;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  double min_loss_scale = 1.0;
  bool consecutive_hysteresis = false;  // DeepSpeed master only
  // Whether any of initial_scale_power, loss_scale_window, hysteresis, min_loss_scale,
  // consecutive_hysteresis was written: without them ZeRO's scaler uses its constructor defaults.
  bool has_dynamic_args = false;
};

struct ZeroConfig {
  int stage = 0;
  int64_t reduce_bucket_size = 500000000;
  int64_t allgather_bucket_size = 500000000;
  bool contiguous_gradients = true;
  std::optional<bool> overlap_comm;  // unset: true at stage 3 only
  bool reduce_scatter = true;
  bool round_robin_gradients = false;
  // elastic_checkpoint (false) and load_from_fp32_weights (true) are accepted at their defaults
  // only: mds writes and reads DeepSpeed's rigid ZeRO files and restores the masters from them.
};

struct CheckpointConfig {
  bool load_universal = false;
  bool parallel_write_pipeline_stage = false;
  bool use_node_local_storage = false;
};

// "comms_logger" (DeepSpeed's CommsLoggerConfig). mds prints a summary at the end of training when
// enabled (train/comms_report.h); verbose and debug (per-call lines, caller names) are refused.
struct CommsLoggerConfig {
  bool enabled = false;
  bool prof_all = true;
  std::vector<std::string> prof_ops;  // op names profiled when prof_all is false
};

struct DeepSpeedConfig {
  std::string source;     // the file name used in messages
  std::string json_text;  // as read, for the ds_config saved in checkpoints

  std::optional<int64_t> train_batch_size;
  std::optional<int64_t> train_micro_batch_size_per_gpu;
  std::optional<int64_t> gradient_accumulation_steps;
  double gradient_clipping = 0.0;
  ZeroConfig zero;
  Fp16Config fp16;
  bool bf16_enabled = false;
  std::optional<CommDataType> communication_data_type;
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  int64_t steps_per_print = 10;
  bool wall_clock_breakdown = false;
  CheckpointConfig checkpoint;
  int64_t pipeline_activation_checkpoint_interval = 0;
  bool zero_allow_untested_optimizer = false;
  CommsLoggerConfig comms_logger;
  // Keys accepted but without effect, as in upstream's runs (the optimizer block, DeepSpeed's
  // activation_checkpointing, wall_clock_breakdown's timers): one line each, "key: why".
  std::vector<std::string> notes;
};

// Parses `json`; `source` names it in every message ("ds_config.json: unknown key 'fp16.foo'").
// Syntax errors and duplicate keys also name the position, via parse_json:
// "ds_config.json:3:3: invalid JSON: expected ',' or '}'", "ds_config.json:1:25: duplicate key
// 'x'".
DeepSpeedConfig parse_deepspeed_config(std::string_view json, const std::string& source);
// Reads and parses the file at `path` (messages name the path as given).
DeepSpeedConfig load_deepspeed_config(const std::string& path);

struct BatchSizes {
  int64_t train_batch_size = 0;
  int64_t micro_batch_size = 0;
  int64_t gradient_accumulation_steps = 0;
};

// DeepSpeed's batch rule for `data_parallel_size` ranks: the missing one(s) of train_batch_size,
// train_micro_batch_size_per_gpu, gradient_accumulation_steps are derived with floor division,
// then all must be > 0 and train_batch_size == micro · grad_accum · D.
BatchSizes resolve_batch_sizes(const DeepSpeedConfig& config, int64_t data_parallel_size);

// The gradient all-reduce dtype when communication_data_type is unset (DeepSpeed v0.8.3): fp16 if
// fp16 is on or ZeRO stage >= 1, else bf16 if bf16 is on, else fp32.
CommDataType effective_communication_data_type(const DeepSpeedConfig& config);
// overlap_comm when unset: true only at stage 3.
bool effective_overlap_comm(const DeepSpeedConfig& config);

// Megatron asserts that --fp16 / --bf16 match the JSON; an Error names the mismatch.
void check_precision_matches(const DeepSpeedConfig& config, bool megatron_fp16, bool megatron_bf16);

}  // namespace mds::config
