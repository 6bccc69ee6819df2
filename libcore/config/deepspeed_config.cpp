#include "config/deepspeed_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "base/error.h"
#include "base/mapped_file.h"
#include "config/json_document.h"

namespace mds::config {
namespace {

// --- Typed access with messages that name the key ------------------------------------------------
class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    base::fail(source_, ": ", parts...);
  }
  [[noreturn]] void wrong_type(const std::string& path, std::string_view wanted,
                               const JsonValue& value) const {
    fail("'", path, "' must be ", wanted, ", got ", json_kind_name(value));
  }

  bool boolean(const JsonValue& value, const std::string& path) const {
    if (!value.is_bool()) wrong_type(path, "a boolean (true or false)", value);
    return value.as_bool();
  }
  double number(const JsonValue& value, const std::string& path) const {
    if (!value.is_number()) wrong_type(path, "a number", value);
    return value.as_double();
  }
  // An integer in [low, high]; integral numbers written as 5e8 count (common for bucket sizes).
  int64_t integer(const JsonValue& value, const std::string& path, int64_t low,
                  int64_t high) const {
    if (!value.is_number()) wrong_type(path, "an integer", value);
    int64_t result = 0;
    if (value.is_int64()) {
      result = value.as_int64();
    } else if (value.is_integral_literal()) {
      fail("'", path, "' is out of range");
    } else {
      const double d = value.as_double();
      if (d != std::floor(d) || std::fabs(d) > 9.0e18) wrong_type(path, "an integer", value);
      result = static_cast<int64_t>(d);
    }
    if (result < low || result > high) {
      if (high == INT64_MAX) fail("'", path, "' must be >= ", low, ", got ", result);
      fail("'", path, "' must be between ", low, " and ", high, ", got ", result);
    }
    return result;
  }
  const JsonValue& block(const JsonValue& value, const std::string& path) const {
    if (!value.is_object()) wrong_type(path, "an object", value);
    return value;
  }
  std::string text(const JsonValue& value, const std::string& path) const {
    if (!value.is_string()) wrong_type(path, "a string", value);
    return value.as_string();
  }

  // Calls handle(key, value, path) for each member (parse_json already refused duplicate keys).
  template <typename Handler>
  void members(const JsonValue& block_object, const std::string& prefix, Handler handle) const {
    for (const JsonMember& field : block_object.members()) {
      const std::string path = prefix.empty() ? field.key : prefix + "." + field.key;
      handle(field.key, field.value, path);
    }
  }
  [[noreturn]] void unknown(const std::string& path) const { fail("unknown key '", path, "'"); }
  [[noreturn]] void unsupported(const std::string& path, std::string_view why = {}) const {
    if (why.empty()) fail("key '", path, "' is not supported yet");
    fail("key '", path, "' is not supported yet (", why, ")");
  }

 private:
  const std::string& source_;
};

template <size_t N>
bool contains(const std::string_view (&names)[N], std::string_view key) {
  return std::find(std::begin(names), std::end(names), key) != std::end(names);
}

// Keys DeepSpeed (v0.8.3 / master) reads that mds does not implement: rejected, never ignored.
constexpr std::string_view kUnsupportedTopLevel[] = {
    "sparse_attention",
    "zero_force_ds_cpu_optimizer",
    "amp",
    "data_types",
    "aio",
    "compression_training",
    "vocabulary_size",
    "seq_parallel_communication_data_type",
    "graph_harvesting",
    "timers",
    "use_data_before_expert_parallel_",
    "zero_quantized_weights",
};
// Features DeepSpeed runs only with {"enabled": true}; a block that leaves them off (enabled false
// or absent, DeepSpeed's default) is accepted whatever else it holds, as DeepSpeed ignores it.
constexpr std::string_view kFeatureBlocks[] = {
    "flops_profiler",
    "tensorboard",
    "wandb",
    "csv_monitor",
    "comet",
    "elasticity",
    "autotuning",
    "nebula",
    "eigenvalue",
    "progressive_layer_drop",
    "quantize_training",
    "hybrid_engine",
    "curriculum_learning",
    "data_efficiency",
};
// Booleans whose DeepSpeed default is false: false is accepted, true is not implemented.
constexpr std::string_view kOffByDefault[] = {
    "memory_breakdown",  "dump_state",           "sparse_gradients",
    "disable_allgather", "dataloader_drop_last", "fp32_allreduce",
};
// DeepSpeed's activation_checkpointing keys (deepspeed.checkpointing.configure).
constexpr std::string_view kActivationCheckpointingBooleans[] = {
    "partition_activations",
    "contiguous_memory_optimization",
    "cpu_checkpointing",
    "synchronize_checkpoint_boundary",
    "profile",
};

constexpr std::string_view kUnsupportedZero[] = {
    "allgather_partitions",
    "offload_param",
    "offload_optimizer",
    "sub_group_size",
    "cpu_offload_param",
    "cpu_offload_use_pin_memory",
    "cpu_offload",
    "prefetch_bucket_size",
    "stage3_prefetch_bucket_size",
    "param_persistence_threshold",
    "stage3_param_persistence_threshold",
    "model_persistence_threshold",
    "stage3_model_persistence_threshold",
    "max_live_parameters",
    "stage3_max_live_parameters",
    "max_reuse_distance",
    "stage3_max_reuse_distance",
    "gather_16bit_weights_on_model_save",
    "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save",
    "ignore_unused_parameters",
    "legacy_stage1",
    "zero_hpz_partition_size",
    "zero_quantized_weights",
    "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients",
    "mics_shard_size",
    "mics_hierarchical_params_gather",
    "memory_efficient_linear",
    "pipeline_loading_checkpoint",
    "override_module_apply",
    "use_multi_rank_bucket_allreduce",
    "log_trace_cache_warnings",
};

void parse_fp16(const Reader& r, const JsonValue& value, Fp16Config& fp16) {
  r.members(r.block(value, "fp16"), "fp16",
            [&](const std::string& key, const JsonValue& v, const std::string& path) {
              if (key == "enabled") {
                fp16.enabled = r.boolean(v, path);
              } else if (key == "loss_scale") {
                fp16.loss_scale = r.number(v, path);
                if (!(fp16.loss_scale >= 0.0) || !std::isfinite(fp16.loss_scale))
                  r.fail("'", path, "' must be >= 0 (0 selects dynamic loss scaling)");
              } else if (key == "initial_scale_power") {
                fp16.initial_scale_power = r.integer(v, path, 0, 127);
                fp16.has_dynamic_args = true;
              } else if (key == "loss_scale_window") {
                fp16.loss_scale_window = r.integer(v, path, 1, INT64_MAX);
                fp16.has_dynamic_args = true;
              } else if (key == "hysteresis") {
                fp16.hysteresis = r.integer(v, path, 1, INT64_MAX);
                fp16.has_dynamic_args = true;
              } else if (key == "min_loss_scale") {
                fp16.min_loss_scale = r.number(v, path);
                if (!(fp16.min_loss_scale > 0.0) || !std::isfinite(fp16.min_loss_scale))
                  r.fail("'", path, "' must be > 0");
                fp16.has_dynamic_args = true;
              } else if (key == "consecutive_hysteresis") {
                fp16.consecutive_hysteresis = r.boolean(v, path);
                fp16.has_dynamic_args = true;
              } else if (key == "auto_cast" || key == "fp16_master_weights_and_grads") {
                r.unsupported(path);
              } else {
                r.unknown(path);
              }
            });
}

void parse_bf16(const Reader& r, const JsonValue& value, const std::string& name, bool& enabled) {
  r.members(r.block(value, name), name,
            [&](const std::string& key, const JsonValue& v, const std::string& path) {
              if (key == "enabled") {
                enabled = r.boolean(v, path);
              } else if (key == "immediate_grad_update" || key == "check_grad_overflow" ||
                         key == "bf16_master_weights_and_grads" || key == "bf16_optimizer_states") {
                r.unsupported(path);
              } else {
                r.unknown(path);
              }
            });
}

void parse_zero(const Reader& r, const JsonValue& value, ZeroConfig& zero) {
  const std::string name = "zero_optimization";
  r.members(r.block(value, name), name,
            [&](const std::string& key, const JsonValue& v, const std::string& path) {
              constexpr int64_t kMax = INT64_MAX;
              if (key == "stage") {
                zero.stage = static_cast<int>(r.integer(v, path, 0, 3));
                if (zero.stage == 3)
                  r.fail("'", path, "' 3 is not supported yet (stages 0, 1 and 2 are)");
              } else if (key == "reduce_bucket_size") {
                zero.reduce_bucket_size = r.integer(v, path, 0, kMax);
              } else if (key == "allgather_bucket_size") {
                zero.allgather_bucket_size = r.integer(v, path, 0, kMax);
              } else if (key == "contiguous_gradients") {
                zero.contiguous_gradients = r.boolean(v, path);
              } else if (key == "overlap_comm") {
                zero.overlap_comm = r.boolean(v, path);
              } else if (key == "reduce_scatter") {
                zero.reduce_scatter = r.boolean(v, path);
              } else if (key == "round_robin_gradients") {
                zero.round_robin_gradients = r.boolean(v, path);
              } else if (key == "elastic_checkpoint") {
                if (r.boolean(v, path))
                  r.unsupported(path, "mds writes and reads ZeRO's rigid optimizer files");
              } else if (key == "load_from_fp32_weights") {
                if (!r.boolean(v, path))
                  r.unsupported(path, "false; mds restores the fp32 masters from the ZeRO files");
              } else if (contains(kUnsupportedZero, key)) {
                r.unsupported(path);
              } else {
                r.unknown(path);
              }
            });
}

void parse_checkpoint(const Reader& r, const JsonValue& value, CheckpointConfig& checkpoint) {
  r.members(r.block(value, "checkpoint"), "checkpoint",
            [&](const std::string& key, const JsonValue& v, const std::string& path) {
              if (key == "load_universal") {
                checkpoint.load_universal = r.boolean(v, path);
              } else if (key == "use_node_local_storage") {
                checkpoint.use_node_local_storage = r.boolean(v, path);
              } else if (key == "parallel_write") {
                r.members(r.block(v, path), path,
                          [&](const std::string& inner, const JsonValue& w,
                              const std::string& inner_path) {
                            if (inner == "pipeline_stage") {
                              checkpoint.parallel_write_pipeline_stage = r.boolean(w, inner_path);
                            } else {
                              r.unknown(inner_path);
                            }
                          });
              } else if (key == "tag_validation" || key == "writer") {
                r.unsupported(path);
              } else {
                r.unknown(path);
              }
            });
}

void parse_pipeline(const Reader& r, const JsonValue& value, int64_t& interval) {
  r.members(r.block(value, "pipeline"), "pipeline",
            [&](const std::string& key, const JsonValue& v, const std::string& path) {
              if (key == "activation_checkpoint_interval") {
                interval = r.integer(v, path, 0, INT64_MAX);
              } else if (key == "stages" || key == "partition" || key == "seed_layers" ||
                         key == "pipe_partitioned" || key == "grad_partitioned" ||
                         key == "use_reentrant") {
                r.unsupported(path, "the pipeline layout comes from Megatron's flags");
              } else {
                r.unknown(path);
              }
            });
}

void parse_comms_logger(const Reader& r, const JsonValue& value, CommsLoggerConfig& logger) {
  r.members(r.block(value, "comms_logger"), "comms_logger",
            [&](const std::string& key, const JsonValue& v, const std::string& path) {
              if (key == "enabled") {
                logger.enabled = r.boolean(v, path);
              } else if (key == "prof_all") {
                logger.prof_all = r.boolean(v, path);
              } else if (key == "prof_ops") {
                if (!v.is_array()) r.wrong_type(path, "a list of operation names", v);
                logger.prof_ops.clear();
                for (const JsonValue& op : v.items()) logger.prof_ops.push_back(r.text(op, path));
              } else if (key == "verbose" || key == "debug") {
                if (r.boolean(v, path)) r.unsupported(path, "only the end-of-training summary is");
              } else {
                r.unknown(path);
              }
            });
}

// Refuses "enabled": true anywhere in the block: DeepSpeed reads some nested switches without
// the block's own (data_efficiency.data_routing.random_ltd.enabled builds a scheduler).
void parse_feature_block(const Reader& r, const JsonValue& value, const std::string& name,
                         const std::string& block) {
  r.members(r.block(value, name), name,
            [&](const std::string& key, const JsonValue& v, const std::string& path) {
              if (key == "enabled" && r.boolean(v, path)) {
                r.unsupported(path, "only " + block + " with everything disabled is accepted");
              }
              if (v.is_object()) parse_feature_block(r, v, path, block);
            });
}

// Megatron-DeepSpeed calls deepspeed.checkpointing.configure with its own flags, which override
// every key of this block (--partition-activations, --checkpoint-in-cpu, ...), and only with
// --deepspeed-activation-checkpointing: the block never acts. Its keys are still checked.
void parse_activation_checkpointing(const Reader& r, const JsonValue& value,
                                    std::vector<std::string>& notes) {
  const std::string name = "activation_checkpointing";
  r.members(r.block(value, name), name,
            [&](const std::string& key, const JsonValue& v, const std::string& path) {
              if (contains(kActivationCheckpointingBooleans, key)) {
                r.boolean(v, path);
              } else if (key == "number_checkpoints") {
                if (!v.is_null()) r.integer(v, path, 1, INT64_MAX);
              } else {
                r.unknown(path);
              }
            });
  notes.push_back(
      "activation_checkpointing: ignored, as by upstream, whose flags (--checkpoint-activations, "
      "--partition-activations, --checkpoint-in-cpu, ...) override every key of it");
}

// The three batch keys may be null (DeepSpeed's "unset").
std::optional<int64_t> optional_positive(const Reader& r, const JsonValue& value,
                                         const std::string& path) {
  if (value.is_null()) return std::nullopt;
  return r.integer(value, path, 1, INT64_MAX);
}

}  // namespace

std::string_view to_string(CommDataType type) {
  switch (type) {
    case CommDataType::kFp32:
      return "fp32";
    case CommDataType::kFp16:
      return "fp16";
    case CommDataType::kBf16:
      return "bfp16";
  }
  return "fp32";
}

DeepSpeedConfig parse_deepspeed_config(std::string_view json, const std::string& source) {
  DeepSpeedConfig config;
  config.source = source;
  config.json_text = std::string(json);
  const JsonValue root = parse_json(json, config.source);
  const Reader r(config.source);
  if (!root.is_object())
    r.fail("expected a JSON object at the top level, got ", json_kind_name(root));

  r.members(root, "", [&](const std::string& key, const JsonValue& v, const std::string& path) {
    if (key == "train_batch_size") {
      config.train_batch_size = optional_positive(r, v, path);
    } else if (key == "train_micro_batch_size_per_gpu") {
      config.train_micro_batch_size_per_gpu = optional_positive(r, v, path);
    } else if (key == "gradient_accumulation_steps") {
      config.gradient_accumulation_steps = optional_positive(r, v, path);
    } else if (key == "gradient_clipping") {
      config.gradient_clipping = r.number(v, path);
      if (!(config.gradient_clipping >= 0.0) || !std::isfinite(config.gradient_clipping))
        r.fail("'", path, "' must be >= 0 (0 disables clipping)");
    } else if (key == "zero_optimization") {
      parse_zero(r, v, config.zero);
    } else if (key == "fp16") {
      parse_fp16(r, v, config.fp16);
    } else if (key == "bf16") {
      parse_bf16(r, v, path, config.bf16_enabled);
    } else if (key == "bfloat16") {
      r.unsupported(path, "use 'bf16'");
    } else if (key == "communication_data_type") {
      if (v.is_null()) {
        config.communication_data_type.reset();
        return;
      }
      std::string name = r.text(v, path);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (name == "fp32") {
        config.communication_data_type = CommDataType::kFp32;
      } else if (name == "fp16") {
        config.communication_data_type = CommDataType::kFp16;
      } else if (name == "bfp16") {
        config.communication_data_type = CommDataType::kBf16;
      } else {
        r.fail("'", path, "' must be one of 'fp16', 'bfp16', 'fp32', got '", name, "'");
      }
    } else if (key == "prescale_gradients") {
      config.prescale_gradients = r.boolean(v, path);
    } else if (key == "gradient_predivide_factor") {
      config.gradient_predivide_factor = r.number(v, path);
      if (!(config.gradient_predivide_factor > 0.0) ||
          !std::isfinite(config.gradient_predivide_factor))
        r.fail("'", path, "' must be > 0");
    } else if (key == "steps_per_print") {
      config.steps_per_print = r.integer(v, path, 1, INT64_MAX);
    } else if (key == "wall_clock_breakdown") {
      config.wall_clock_breakdown = r.boolean(v, path);
      if (config.wall_clock_breakdown) {
        config.notes.push_back(
            "wall_clock_breakdown: DeepSpeed's forward/backward/step timer lines are not printed "
            "(the iteration line's timing and --metrics-file are)");
      }
    } else if (key == "checkpoint") {
      parse_checkpoint(r, v, config.checkpoint);
    } else if (key == "pipeline") {
      parse_pipeline(r, v, config.pipeline_activation_checkpoint_interval);
    } else if (key == "comms_logger") {
      parse_comms_logger(r, v, config.comms_logger);
    } else if (key == "zero_allow_untested_optimizer") {
      config.zero_allow_untested_optimizer = r.boolean(v, path);
    } else if (key == "optimizer") {
      // DeepSpeed passes legacy_fusion on to its fp16 wrapper even with a client optimizer.
      if (const JsonValue* fusion = r.block(v, path).find("legacy_fusion")) {
        if (r.boolean(*fusion, path + ".legacy_fusion")) {
          r.unsupported(path + ".legacy_fusion", "true");
        }
      }
      config.notes.push_back(
          "optimizer: ignored, as by upstream: DeepSpeed takes the client optimizer Megatron "
          "builds from its flags (--optimizer, --lr, --adam-beta1, ...)");
    } else if (key == "scheduler") {
      r.unsupported(path, "it would replace AnnealingLR; use --lr-decay-style and related flags");
    } else if (key == "activation_checkpointing") {
      parse_activation_checkpointing(r, v, config.notes);
    } else if (contains(kFeatureBlocks, key)) {
      parse_feature_block(r, v, path, "a '" + path + "' block");
    } else if (contains(kOffByDefault, key)) {
      if (r.boolean(v, path)) r.unsupported(path);
    } else if (contains(kUnsupportedTopLevel, key)) {
      r.unsupported(path);
    } else {
      r.unknown(path);
    }
  });

  if (config.fp16.enabled && config.bf16_enabled) r.fail("fp16 and bf16 cannot both be enabled");
  if (config.prescale_gradients && config.gradient_predivide_factor != 1.0)
    r.fail("'gradient_predivide_factor' must be 1.0 when 'prescale_gradients' is true");
  if (!config.train_batch_size && !config.train_micro_batch_size_per_gpu)
    r.fail("either 'train_batch_size' or 'train_micro_batch_size_per_gpu' must be given");
  return config;
}

DeepSpeedConfig load_deepspeed_config(const std::string& path) {
  return parse_deepspeed_config(base::read_file(path), path);
}

BatchSizes resolve_batch_sizes(const DeepSpeedConfig& config, int64_t data_parallel_size) {
  if (data_parallel_size <= 0)
    base::fail("data-parallel size must be > 0, got ", data_parallel_size);
  const int64_t d = data_parallel_size;
  const auto& train = config.train_batch_size;
  const auto& micro = config.train_micro_batch_size_per_gpu;
  const auto& accum = config.gradient_accumulation_steps;
  BatchSizes sizes;
  // DeepSpeed's _set_batch_related_parameters, case by case.
  if (train && micro && accum) {
    sizes = {*train, *micro, *accum};
  } else if (train && micro) {
    sizes = {*train, *micro, *train / *micro / d};
  } else if (train && accum) {
    sizes = {*train, *train / d / *accum, *accum};
  } else if (micro && accum) {
    sizes = {*micro * *accum * d, *micro, *accum};
  } else if (train) {
    sizes = {*train, *train / d, 1};
  } else if (micro) {
    sizes = {*micro * d, *micro, 1};
  } else {
    base::fail(config.source,
               ": either 'train_batch_size' or 'train_micro_batch_size_per_gpu' must be given");
  }
  if (sizes.micro_batch_size <= 0)
    base::fail(config.source, ": derived train_micro_batch_size_per_gpu is 0 (train_batch_size ",
               sizes.train_batch_size, " is too small for ", d, " data-parallel ranks)");
  if (sizes.gradient_accumulation_steps <= 0)
    base::fail(config.source, ": derived gradient_accumulation_steps is 0 (train_batch_size ",
               sizes.train_batch_size, " < train_micro_batch_size_per_gpu ", sizes.micro_batch_size,
               " * ", d, " data-parallel ranks)");
  if (sizes.train_batch_size != sizes.micro_batch_size * sizes.gradient_accumulation_steps * d)
    base::fail(config.source, ": train_batch_size (", sizes.train_batch_size,
               ") is not equal to train_micro_batch_size_per_gpu (", sizes.micro_batch_size,
               ") * gradient_accumulation_steps (", sizes.gradient_accumulation_steps,
               ") * data-parallel size (", d, ")");
  return sizes;
}

CommDataType effective_communication_data_type(const DeepSpeedConfig& config) {
  if (config.communication_data_type) return *config.communication_data_type;
  if (config.fp16.enabled || config.zero.stage >= 1) return CommDataType::kFp16;
  if (config.bf16_enabled) return CommDataType::kBf16;
  return CommDataType::kFp32;
}

bool effective_overlap_comm(const DeepSpeedConfig& config) {
  return config.zero.overlap_comm.value_or(config.zero.stage == 3);
}

void check_precision_matches(const DeepSpeedConfig& config, bool megatron_fp16,
                             bool megatron_bf16) {
  if (config.fp16.enabled != megatron_fp16)
    base::fail(config.source, ": fp16.enabled is ", config.fp16.enabled ? "true" : "false",
               " but --fp16 is ", megatron_fp16 ? "given" : "not given",
               " (megatron fp16 config does not match deepspeed)");
  if (config.bf16_enabled != megatron_bf16)
    base::fail(config.source, ": bf16.enabled is ", config.bf16_enabled ? "true" : "false",
               " but --bf16 is ", megatron_bf16 ? "given" : "not given",
               " (megatron bf16 config does not match deepspeed)");
}

}  // namespace mds::config
