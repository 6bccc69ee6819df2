#include "config/deepspeed_config.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "test_support.h"

namespace mds::config {
namespace {

std::string error_of(const std::string& json) {
  try {
    parse_deepspeed_config(json, "ds_config.json");
  } catch (const base::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(DeepSpeedConfig, Tr1Fp16File) {
  const DeepSpeedConfig c = parse_deepspeed_config(R"({
  "train_micro_batch_size_per_gpu": 1,
  "train_batch_size": 1024,
  "gradient_clipping": 1.0,
  "zero_optimization": {"stage": 1},
  "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 2,
           "min_loss_scale": 1, "initial_scale_power": 12},
  "steps_per_print": 2000,
  "wall_clock_breakdown": false,
  "zero_allow_untested_optimizer": true
})",
                                                   "ds_config.json");
  EXPECT_EQ(c.source, "ds_config.json");
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 1);
  EXPECT_EQ(c.train_batch_size, 1024);
  EXPECT_FALSE(c.gradient_accumulation_steps);
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(c.zero.stage, 1);
  EXPECT_TRUE(c.fp16.enabled);
  EXPECT_EQ(c.fp16.loss_scale, 0.0);
  EXPECT_EQ(c.fp16.loss_scale_window, 500);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_EQ(c.fp16.min_loss_scale, 1.0);
  EXPECT_EQ(c.fp16.initial_scale_power, 12);
  EXPECT_TRUE(c.fp16.has_dynamic_args);
  EXPECT_FALSE(c.bf16_enabled);
  EXPECT_EQ(c.steps_per_print, 2000);
  EXPECT_FALSE(c.wall_clock_breakdown);
  EXPECT_TRUE(c.zero_allow_untested_optimizer);
  EXPECT_EQ(effective_communication_data_type(c), CommDataType::kFp16);
  const BatchSizes b = resolve_batch_sizes(c, 16);
  EXPECT_EQ(b.train_batch_size, 1024);
  EXPECT_EQ(b.micro_batch_size, 1);
  EXPECT_EQ(b.gradient_accumulation_steps, 64);
}

TEST(DeepSpeedConfig, DefaultsOfAMinimalBf16File) {
  const DeepSpeedConfig c = parse_deepspeed_config(
      R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}})", "x.json");
  EXPECT_TRUE(c.bf16_enabled);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_FALSE(c.fp16.has_dynamic_args);
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_EQ(c.fp16.loss_scale_window, 1000);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_EQ(c.fp16.min_loss_scale, 1.0);
  EXPECT_FALSE(c.fp16.consecutive_hysteresis);
  EXPECT_EQ(c.gradient_clipping, 0.0);
  EXPECT_EQ(c.zero.stage, 0);
  EXPECT_EQ(c.zero.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.zero.allgather_bucket_size, 500000000);
  EXPECT_TRUE(c.zero.contiguous_gradients);
  EXPECT_TRUE(c.zero.reduce_scatter);
  EXPECT_FALSE(c.zero.round_robin_gradients);
  EXPECT_FALSE(effective_overlap_comm(c));
  EXPECT_FALSE(c.communication_data_type);
  EXPECT_EQ(effective_communication_data_type(c), CommDataType::kBf16);
  EXPECT_FALSE(c.prescale_gradients);
  EXPECT_EQ(c.gradient_predivide_factor, 1.0);
  EXPECT_EQ(c.steps_per_print, 10);
  EXPECT_FALSE(c.wall_clock_breakdown);
  EXPECT_FALSE(c.checkpoint.load_universal);
  EXPECT_FALSE(c.checkpoint.parallel_write_pipeline_stage);
  EXPECT_FALSE(c.checkpoint.use_node_local_storage);
  EXPECT_EQ(c.pipeline_activation_checkpoint_interval, 0);
  EXPECT_FALSE(c.zero_allow_untested_optimizer);
  const BatchSizes b = resolve_batch_sizes(c, 4);
  EXPECT_EQ(b.train_batch_size, 8);
  EXPECT_EQ(b.gradient_accumulation_steps, 1);
}

TEST(DeepSpeedConfig, EveryOtherKey) {
  const DeepSpeedConfig c = parse_deepspeed_config(R"({
    "train_batch_size": 64, "gradient_accumulation_steps": 4,
    "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e7, "allgather_bucket_size": 200,
      "contiguous_gradients": false, "overlap_comm": true, "reduce_scatter": false,
      "round_robin_gradients": true, "elastic_checkpoint": false, "load_from_fp32_weights": true},
    "fp16": {"enabled": true, "loss_scale": 128.0, "consecutive_hysteresis": true},
    "bf16": {"enabled": false},
    "communication_data_type": "FP32",
    "prescale_gradients": false, "gradient_predivide_factor": 2.0,
    "checkpoint": {"load_universal": true, "use_node_local_storage": true,
                   "parallel_write": {"pipeline_stage": true}},
    "pipeline": {"activation_checkpoint_interval": 2}
  })",
                                                   "x.json");
  EXPECT_EQ(c.zero.stage, 2);
  EXPECT_EQ(c.zero.reduce_bucket_size, 50000000);
  EXPECT_EQ(c.zero.allgather_bucket_size, 200);
  EXPECT_FALSE(c.zero.contiguous_gradients);
  EXPECT_TRUE(effective_overlap_comm(c));
  EXPECT_FALSE(c.zero.reduce_scatter);
  EXPECT_TRUE(c.zero.round_robin_gradients);
  EXPECT_EQ(c.fp16.loss_scale, 128.0);
  EXPECT_TRUE(c.fp16.consecutive_hysteresis);
  EXPECT_TRUE(c.fp16.has_dynamic_args);
  EXPECT_EQ(c.communication_data_type, CommDataType::kFp32);
  EXPECT_EQ(effective_communication_data_type(c), CommDataType::kFp32);
  EXPECT_EQ(c.gradient_predivide_factor, 2.0);
  EXPECT_TRUE(c.checkpoint.load_universal);
  EXPECT_TRUE(c.checkpoint.use_node_local_storage);
  EXPECT_TRUE(c.checkpoint.parallel_write_pipeline_stage);
  EXPECT_EQ(c.pipeline_activation_checkpoint_interval, 2);
  const BatchSizes b = resolve_batch_sizes(c, 8);
  EXPECT_EQ(b.micro_batch_size, 2);
  EXPECT_EQ(to_string(CommDataType::kBf16), "bfp16");
}

TEST(DeepSpeedConfig, CommunicationTypeDefaultsOfV083) {
  EXPECT_EQ(
      effective_communication_data_type(parse_deepspeed_config(R"({"train_batch_size": 1})", "x")),
      CommDataType::kFp32);
  // Stage >= 1 communicates in fp16 even for bf16 runs in v0.8.3.
  EXPECT_EQ(effective_communication_data_type(parse_deepspeed_config(
                R"({"train_batch_size": 1, "bf16": {"enabled": true},
                    "zero_optimization": {"stage": 1}})",
                "x")),
            CommDataType::kFp16);
  EXPECT_EQ(effective_communication_data_type(parse_deepspeed_config(
                R"({"train_batch_size": 1, "communication_data_type": "bfp16"})", "x")),
            CommDataType::kBf16);
  EXPECT_FALSE(
      parse_deepspeed_config(R"({"train_batch_size": 1, "communication_data_type": null})", "x")
          .communication_data_type);
}

TEST(DeepSpeedConfig, BatchRuleDerivesTheMissingValue) {
  auto sizes = [](const std::string& json, int64_t dp) {
    const BatchSizes b = resolve_batch_sizes(parse_deepspeed_config(json, "ds.json"), dp);
    return std::to_string(b.train_batch_size) + "=" + std::to_string(b.micro_batch_size) + "x" +
           std::to_string(b.gradient_accumulation_steps);
  };
  EXPECT_EQ(sizes(R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4})", 2), "64=4x8");
  EXPECT_EQ(sizes(R"({"train_batch_size": 64, "gradient_accumulation_steps": 4})", 2), "64=8x4");
  EXPECT_EQ(sizes(R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 3})", 2),
            "24=4x3");
  EXPECT_EQ(sizes(R"({"train_batch_size": 64})", 4), "64=16x1");
  EXPECT_EQ(sizes(R"({"train_micro_batch_size_per_gpu": 4})", 4), "16=4x1");
  EXPECT_EQ(sizes(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 4,
                      "gradient_accumulation_steps": 3})",
                  2),
            "24=4x3");
  EXPECT_EQ(sizes(R"({"train_batch_size": null, "train_micro_batch_size_per_gpu": 4})", 1),
            "4=4x1");
}

std::string batch_error(const std::string& json, int64_t dp) {
  try {
    resolve_batch_sizes(parse_deepspeed_config(json, "ds.json"), dp);
  } catch (const base::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(DeepSpeedConfig, BatchRuleErrors) {
  EXPECT_EQ(batch_error(R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4})", 3),
            "ds.json: train_batch_size (64) is not equal to train_micro_batch_size_per_gpu (4) * "
            "gradient_accumulation_steps (5) * data-parallel size (3)");
  EXPECT_EQ(batch_error(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 4,
                            "gradient_accumulation_steps": 4})",
                        2),
            "ds.json: train_batch_size (24) is not equal to train_micro_batch_size_per_gpu (4) * "
            "gradient_accumulation_steps (4) * data-parallel size (2)");
  EXPECT_EQ(batch_error(R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4})", 8),
            "ds.json: derived gradient_accumulation_steps is 0 (train_batch_size 16 < "
            "train_micro_batch_size_per_gpu 4 * 8 data-parallel ranks)");
  EXPECT_EQ(batch_error(R"({"train_batch_size": 4})", 8),
            "ds.json: derived train_micro_batch_size_per_gpu is 0 (train_batch_size 4 is too small "
            "for 8 data-parallel ranks)");
  EXPECT_EQ(batch_error(R"({"train_batch_size": 4})", 0), "data-parallel size must be > 0, got 0");
}

TEST(DeepSpeedConfig, UnknownKeysNameTheJsonPath) {
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "zero_optimization": {"foo": 1}})"),
            "ds_config.json: unknown key 'zero_optimization.foo'");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "train_batch": 8})"),
            "ds_config.json: unknown key 'train_batch'");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"enable": true}})"),
            "ds_config.json: unknown key 'fp16.enable'");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "bf16": {"enabled": true, "x": 1}})"),
            "ds_config.json: unknown key 'bf16.x'");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "checkpoint": {"parallel_write": {"x": 1}}})"),
            "ds_config.json: unknown key 'checkpoint.parallel_write.x'");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "checkpoint": {"y": 1}})"),
            "ds_config.json: unknown key 'checkpoint.y'");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "pipeline": {"z": 1}})"),
            "ds_config.json: unknown key 'pipeline.z'");
}

TEST(DeepSpeedConfig, KnownButUnimplementedKeysAreNotSupportedYet) {
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "zero_optimization": {"offload_optimizer": {}}})"),
            "ds_config.json: key 'zero_optimization.offload_optimizer' is not supported yet");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "zero_optimization": {"stage": 3}})"),
            "ds_config.json: 'zero_optimization.stage' 3 is not supported yet (stages 0, 1 and 2 "
            "are)");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "scheduler": {}})"),
            "ds_config.json: key 'scheduler' is not supported yet (it would replace AnnealingLR; "
            "use --lr-decay-style and related flags)");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "bfloat16": {"enabled": true}})"),
            "ds_config.json: key 'bfloat16' is not supported yet (use 'bf16')");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "tensorboard": {"enabled": true}})"),
            "ds_config.json: key 'tensorboard.enabled' is not supported yet (only a 'tensorboard' "
            "block with everything disabled is accepted)");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "data_efficiency": {"enabled": false,
              "data_routing": {"random_ltd": {"enabled": true}}}})"),
            "ds_config.json: key 'data_efficiency.data_routing.random_ltd.enabled' is not "
            "supported yet (only a 'data_efficiency' block with everything disabled is accepted)");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "optimizer": {"type": "Adam",
              "legacy_fusion": true}})"),
            "ds_config.json: key 'optimizer.legacy_fusion' is not supported yet (true)");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "memory_breakdown": true})"),
            "ds_config.json: key 'memory_breakdown' is not supported yet");
  EXPECT_EQ(
      error_of(R"({"train_batch_size": 8, "zero_optimization": {"elastic_checkpoint": true}})"),
      "ds_config.json: key 'zero_optimization.elastic_checkpoint' is not supported yet (mds "
      "writes and reads ZeRO's rigid optimizer files)");
  EXPECT_EQ(
      error_of(
          R"({"train_batch_size": 8, "zero_optimization": {"load_from_fp32_weights": false}})"),
      "ds_config.json: key 'zero_optimization.load_from_fp32_weights' is not supported yet (false; "
      "mds restores the fp32 masters from the ZeRO files)");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"auto_cast": true}})"),
            "ds_config.json: key 'fp16.auto_cast' is not supported yet");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "checkpoint": {"tag_validation": "Warn"}})"),
            "ds_config.json: key 'checkpoint.tag_validation' is not supported yet");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "pipeline": {"partition": "uniform"}})"),
            "ds_config.json: key 'pipeline.partition' is not supported yet (the pipeline layout "
            "comes from Megatron's flags)");
  EXPECT_EQ(
      error_of(R"({"train_batch_size": 8, "zero_optimization": {"allgather_partitions": true}})"),
      "ds_config.json: key 'zero_optimization.allgather_partitions' is not supported yet");
}

TEST(DeepSpeedConfig, WrongTypesAndRanges) {
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"enabled": "true"}})"),
            "ds_config.json: 'fp16.enabled' must be a boolean (true or false), got a string");
  EXPECT_EQ(error_of(R"({"train_batch_size": "auto"})"),
            "ds_config.json: 'train_batch_size' must be an integer, got a string");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8.5})"),
            "ds_config.json: 'train_batch_size' must be an integer, got a number");
  EXPECT_EQ(error_of(R"({"train_batch_size": 0})"),
            "ds_config.json: 'train_batch_size' must be >= 1, got 0");
  EXPECT_EQ(error_of(R"({"train_batch_size": 18446744073709551615})"),
            "ds_config.json: 'train_batch_size' is out of range");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "gradient_clipping": true})"),
            "ds_config.json: 'gradient_clipping' must be a number, got a boolean");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "gradient_clipping": -1})"),
            "ds_config.json: 'gradient_clipping' must be >= 0 (0 disables clipping)");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "zero_optimization": 1})"),
            "ds_config.json: 'zero_optimization' must be an object, got an integer");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "zero_optimization": {"stage": 4}})"),
            "ds_config.json: 'zero_optimization.stage' must be between 0 and 3, got 4");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "zero_optimization": {"reduce_bucket_size": -1}})"),
            "ds_config.json: 'zero_optimization.reduce_bucket_size' must be >= 0, got -1");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"loss_scale_window": 0}})"),
            "ds_config.json: 'fp16.loss_scale_window' must be >= 1, got 0");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"hysteresis": 0}})"),
            "ds_config.json: 'fp16.hysteresis' must be >= 1, got 0");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"initial_scale_power": 200}})"),
            "ds_config.json: 'fp16.initial_scale_power' must be between 0 and 127, got 200");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"min_loss_scale": 0}})"),
            "ds_config.json: 'fp16.min_loss_scale' must be > 0");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"loss_scale": -2}})"),
            "ds_config.json: 'fp16.loss_scale' must be >= 0 (0 selects dynamic loss scaling)");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": []})"),
            "ds_config.json: 'fp16' must be an object, got an array");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "steps_per_print": 0})"),
            "ds_config.json: 'steps_per_print' must be >= 1, got 0");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "wall_clock_breakdown": null})"),
            "ds_config.json: 'wall_clock_breakdown' must be a boolean (true or false), got null");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "communication_data_type": "bf16"})"),
            "ds_config.json: 'communication_data_type' must be one of 'fp16', 'bfp16', 'fp32', got "
            "'bf16'");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "communication_data_type": 16})"),
            "ds_config.json: 'communication_data_type' must be a string, got an integer");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "gradient_predivide_factor": 0})"),
            "ds_config.json: 'gradient_predivide_factor' must be > 0");
  EXPECT_EQ(
      error_of(R"({"train_batch_size": 8, "pipeline": {"activation_checkpoint_interval": -1}})"),
      "ds_config.json: 'pipeline.activation_checkpoint_interval' must be >= 0, got -1");
}

TEST(DeepSpeedConfig, WholeFileRules) {
  EXPECT_EQ(error_of(R"([1, 2])"),
            "ds_config.json: expected a JSON object at the top level, got an array");
  EXPECT_EQ(error_of(R"({"gradient_clipping": 1.0})"),
            "ds_config.json: either 'train_batch_size' or 'train_micro_batch_size_per_gpu' must be "
            "given");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"enabled": true},
                        "bf16": {"enabled": true}})"),
            "ds_config.json: fp16 and bf16 cannot both be enabled");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "prescale_gradients": true,
                        "gradient_predivide_factor": 2.0})"),
            "ds_config.json: 'gradient_predivide_factor' must be 1.0 when 'prescale_gradients' is "
            "true");
  // DeepSpeed loads with a hook that rejects duplicate keys.
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "train_batch_size": 16})"),
            "ds_config.json:1:25: duplicate key 'train_batch_size'");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"enabled": true, "enabled": false}})"),
            "ds_config.json:1:51: duplicate key 'fp16.enabled'");
}

TEST(DeepSpeedConfig, InvalidJsonNamesThePosition) {
  EXPECT_EQ(error_of("{\n  \"train_batch_size\": 8\n  \"fp16\": {}\n}"),
            "ds_config.json:3:3: invalid JSON: expected ',' or '}'");
  EXPECT_EQ(error_of("{\"train_batch_size\": 8,}"),
            "ds_config.json:1:24: invalid JSON: expected a string key");
  EXPECT_EQ(error_of(""), "ds_config.json:1:1: invalid JSON: expected a value");
  EXPECT_EQ(error_of("{\"a\": tru}"), "ds_config.json:1:7: invalid JSON: expected a value");
  EXPECT_EQ(error_of("{\"a\": 01}"), "ds_config.json:1:8: invalid JSON: expected ',' or '}'");
  EXPECT_EQ(error_of("{\"a\": \"x}"), "ds_config.json:1:10: invalid JSON: unterminated string");
  EXPECT_EQ(error_of("{\"a\": 1} x"),
            "ds_config.json:1:10: invalid JSON: extra data after the value");
  EXPECT_EQ(error_of("{\"a\": [1 2]}"), "ds_config.json:1:10: invalid JSON: expected ',' or ']'");
  EXPECT_EQ(error_of("{\"a\": \"\\q\"}"), "ds_config.json:1:9: invalid JSON: invalid escape");
  EXPECT_EQ(error_of("{\"a\" 1}"), "ds_config.json:1:6: invalid JSON: expected ':'");
  // Comments (accepted by DeepSpeed's hjson) are not JSON.
  EXPECT_EQ(error_of("{\"a\": 1 // c\n}"), "ds_config.json:1:9: invalid JSON: expected ',' or '}'");
  // Invalid UTF-8 is located too.
  EXPECT_EQ(error_of("{\"a\": \"\xff\"}"),
            "ds_config.json:1:8: invalid JSON: invalid UTF-8 in string");
}

TEST(DeepSpeedConfig, LoadFromFile) {
  testing_support::ScratchDir dir;
  const std::string path = dir.file("ds_config.json");
  testing_support::write_file(path, R"({"train_batch_size": 8, "fp16": {"enabled": 1}})");
  try {
    load_deepspeed_config(path);
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": 'fp16.enabled' must be a boolean (true or false), got an integer");
  }
  const std::string json = R"({"train_micro_batch_size_per_gpu": 2})";
  testing_support::write_file(path, json);
  const DeepSpeedConfig c = load_deepspeed_config(path);
  EXPECT_EQ(c.json_text, json);
  EXPECT_EQ(c.source, path);
  EXPECT_THROW(load_deepspeed_config(dir.file("missing.json")), base::Error);
}

TEST(DeepSpeedConfig, PrecisionMustMatchMegatronFlags) {
  const DeepSpeedConfig c =
      parse_deepspeed_config(R"({"train_batch_size": 8, "bf16": {"enabled": true}})", "ds.json");
  EXPECT_NO_THROW(check_precision_matches(c, false, true));
  try {
    check_precision_matches(c, true, false);
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_STREQ(e.what(),
                 "ds.json: fp16.enabled is false but --fp16 is given (megatron fp16 config does "
                 "not match deepspeed)");
  }
  try {
    check_precision_matches(c, false, false);
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_STREQ(e.what(),
                 "ds.json: bf16.enabled is true but --bf16 is not given (megatron bf16 config "
                 "does not match deepspeed)");
  }
}

// Configs ported from real runs: features left off, the optimizer block DeepSpeed ignores for
// Megatron's client optimizer, and DeepSpeed's activation_checkpointing block, which Megatron's
// flags override, are accepted; the last two and wall_clock_breakdown leave a note.
TEST(DeepSpeedConfig, FeaturesLeftOffAndIgnoredBlocksAreAccepted) {
  const DeepSpeedConfig c = parse_deepspeed_config(R"({
    "train_batch_size": 8,
    "flops_profiler": {"enabled": false, "profile_step": 1, "detailed": true},
    "tensorboard": {"enabled": false, "output_path": "tb/"}, "wandb": {"enabled": false},
    "csv_monitor": {}, "curriculum_learning": {"enabled": false},
    "memory_breakdown": false, "dump_state": false,
    "zero_optimization": {"stage": 1, "elastic_checkpoint": false, "load_from_fp32_weights": true},
    "optimizer": {"type": "Adam", "params": {"lr": 1e-4}},
    "activation_checkpointing": {"partition_activations": false, "cpu_checkpointing": false,
      "contiguous_memory_optimization": false, "number_checkpoints": null,
      "synchronize_checkpoint_boundary": false, "profile": false},
    "wall_clock_breakdown": true
  })",
                                                   "x.json");
  EXPECT_EQ(c.zero.stage, 1);
  ASSERT_EQ(c.notes.size(), 3u);
  EXPECT_EQ(c.notes[0].rfind("optimizer: ignored, as by upstream", 0), 0u) << c.notes[0];
  EXPECT_EQ(c.notes[1].rfind("activation_checkpointing: ignored, as by upstream", 0), 0u)
      << c.notes[1];
  EXPECT_EQ(c.notes[2].rfind("wall_clock_breakdown: ", 0), 0u) << c.notes[2];
  EXPECT_TRUE(parse_deepspeed_config(R"({"train_batch_size": 8})", "x.json").notes.empty());

  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "activation_checkpointing": {"partition": 1}})"),
            "ds_config.json: unknown key 'activation_checkpointing.partition'");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "activation_checkpointing": {"profile": 1}})"),
            "ds_config.json: 'activation_checkpointing.profile' must be a boolean (true or false), "
            "got an integer");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "flops_profiler": {"enabled": "no"}})"),
            "ds_config.json: 'flops_profiler.enabled' must be a boolean (true or false), got a "
            "string");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "optimizer": []})"),
            "ds_config.json: 'optimizer' must be an object, got an array");
}

}  // namespace
}  // namespace mds::config
