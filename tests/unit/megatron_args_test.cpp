#include "ckpt/megatron_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "io/torch_file.h"
#include "pretrain_command_line.h"
#include "test_support.h"

namespace mds::ckpt {
namespace {

using config::PretrainArgs;
using io::Value;
using io::ValueRef;
using testing_support::ScratchDir;
using testing_support::write_file;

// vars(args) of upstream's parse_args for the issue command line (megatron/arguments.py with
// DeepSpeed v0.8.3's add_config_arguments), in order.
const std::vector<std::string> kParsedAttributes = {
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "kv_channels",
    "max_position_embeddings",
    "make_vocab_size_divisible_by",
    "pad_vocab_size_to",
    "layernorm_epsilon",
    "sync_tp_duplicated_parameters",
    "apply_residual_connection_post_layernorm",
    "embed_layernorm",
    "openai_gelu",
    "onnx_safe",
    "bert_binary_head",
    "position_embedding_type",
    "glu_activation",
    "kill_switch_path",
    "log_level",
    "log_level_replica",
    "attention_dropout",
    "hidden_dropout",
    "weight_decay",
    "clip_grad",
    "adam_beta1",
    "adam_beta2",
    "adam_eps",
    "sgd_momentum",
    "micro_batch_size",
    "global_batch_size",
    "rampup_batch_size",
    "checkpoint_activations",
    "distribute_checkpointed_activations",
    "checkpoint_num_layers",
    "train_iters",
    "train_samples",
    "train_tokens",
    "log_interval",
    "exit_interval",
    "exit_duration_in_mins",
    "tensorboard_dir",
    "masked_softmax_fusion",
    "bias_gelu_fusion",
    "bias_dropout_fusion",
    "optimizer",
    "use_bnb_optimizer",
    "dataloader_type",
    "cpu_optimizer",
    "cpu_torch_adam",
    "codecarbon_dir",
    "eval_only",
    "skip_train_iteration_range",
    "inference",
    "abort_on_unmet_fused_kernel_constraints",
    "pp_partition_method",
    "seed",
    "init_method_std",
    "init_method_xavier_uniform",
    "lr",
    "lr_decay_style",
    "lr_decay_iters",
    "lr_decay_samples",
    "lr_decay_tokens",
    "lr_warmup_fraction",
    "lr_warmup_iters",
    "lr_warmup_samples",
    "min_lr",
    "override_lr_scheduler",
    "use_checkpoint_lr_scheduler",
    "universal_checkpoint",
    "save",
    "save_interval",
    "no_save_optim",
    "no_save_rng",
    "load",
    "no_load_optim",
    "no_load_rng",
    "finetune",
    "fp16",
    "bf16",
    "loss_scale",
    "initial_loss_scale",
    "min_loss_scale",
    "loss_scale_window",
    "hysteresis",
    "fp32_residual_connection",
    "apply_query_key_layer_scaling",
    "attention_softmax_in_fp32",
    "accumulate_allreduce_grads_in_fp32",
    "fp16_lm_cross_entropy",
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "num_layers_per_virtual_pipeline_stage",
    "distributed_backend",
    "DDP_impl",
    "use_contiguous_buffers_in_ddp",
    "scatter_gather_tensors_in_pipeline",
    "local_rank",
    "lazy_mpu_init",
    "use_cpu_initialization",
    "eval_iters",
    "eval_interval",
    "data_path",
    "split",
    "train_weighted_split_paths",
    "valid_weighted_split_paths",
    "test_weighted_split_paths",
    "train_weighted_split_paths_path",
    "valid_weighted_split_paths_path",
    "test_weighted_split_paths_path",
    "log_path",
    "vocab_file",
    "merge_file",
    "vocab_extra_ids",
    "seq_length",
    "encoder_seq_length",
    "decoder_seq_length",
    "retriever_seq_length",
    "sample_rate",
    "mask_prob",
    "short_seq_prob",
    "mmap_warmup",
    "num_workers",
    "valid_num_workers",
    "tokenizer_type",
    "tokenizer_name_or_path",
    "data_impl",
    "reset_position_ids",
    "reset_attention_mask",
    "eod_mask_loss",
    "loss_on_targets_only",
    "reweight_loss_based_on_position_frequency",
    "noise_density",
    "mean_noise_span_length",
    "adlr_autoresume",
    "adlr_autoresume_interval",
    "ict_head_size",
    "biencoder_projection_dim",
    "biencoder_shared_query_context_model",
    "ict_load",
    "bert_load",
    "titles_data_path",
    "query_in_block_prob",
    "use_one_sent_docs",
    "evidence_data_path",
    "retriever_report_topk_accuracies",
    "retriever_score_scaling",
    "block_data_path",
    "embedding_path",
    "indexer_batch_size",
    "indexer_log_interval",
    "num_classes",
    "img_dim",
    "num_channels",
    "patch_dim",
    "log_params_norm",
    "log_num_zeros_in_grad",
    "tensorboard_log_interval",
    "tensorboard_queue_size",
    "log_timers_to_tensorboard",
    "log_batch_size_to_tensorboard",
    "log_learning_rate_to_tensorboard",
    "log_loss_scale_to_tensorboard",
    "log_validation_ppl_to_tensorboard",
    "zero_stage",
    "zero_reduce_scatter",
    "zero_contigious_gradients",
    "zero_reduce_bucket_size",
    "zero_allgather_bucket_size",
    "remote_device",
    "use_pin_memory",
    "scattered_embeddings",
    "split_transformers",
    "memory_centric_tiled_linear",
    "tile_factor",
    "deepspeed_activation_checkpointing",
    "partition_activations",
    "contigious_checkpointing",
    "checkpoint_in_cpu",
    "synchronize_each_layer",
    "profile_backward",
    "deepspeed",
    "deepspeed_config",
    "deepscale",
    "deepscale_config",
    "deepspeed_mpi",
    "rank",
    "world_size",
    "data_parallel_size",
    "valid_weighted_split_names",
    "valid_weighted_split_weights",
    "valid_weighted_split_splits",
    "test_weighted_split_names",
    "test_weighted_split_weights",
    "test_weighted_split_splits",
    "virtual_pipeline_model_parallel_size",
    "params_dtype",
    "consumed_train_samples",
    "consumed_valid_samples",
    "consumed_train_tokens",
    "gigaflos_no_embeds",
    "curriculum_learning",
};

// What the tokenizer, pretrain() and the trainer add before a checkpoint is saved.
const std::vector<std::string> kRunAttributes = {"padded_vocab_size",
                                                 "deepspeed_configuration",
                                                 "pretrain_causal_attention",
                                                 "iteration",
                                                 "parameters_in_billions_no_embedding",
                                                 "do_train",
                                                 "do_valid",
                                                 "do_test"};

using testing_support::Argv;

class MegatronArgsTest : public ::testing::Test {
 protected:
  // The issue's command line plus `extra`, validated against a ds_config holding `json`.
  PretrainArgs args(const std::vector<std::string>& extra = {},
                    const std::string& json = R"({"train_micro_batch_size_per_gpu": 4,
                                                  "train_batch_size": 8,
                                                  "gradient_clipping": 1.0})") {
    const std::string config = dir_.file("cfg.json");
    write_file(config, json);
    std::vector<std::string> line =
        testing_support::issue_command_line(config, "vocab.json", "merges.txt");
    line.insert(line.end(), extra.begin(), extra.end());
    Argv argv(line);
    PretrainArgs a = config::parse_pretrain_args(argv.argc(), argv.argv());
    config::validate_pretrain_args(a, config::ProcessEnv{});
    return a;
  }

  static MegatronRunValues run() {
    MegatronRunValues r;
    r.padded_vocab_size = 50304;
    r.iteration = 500;
    r.consumed_train_samples = 4000;
    r.consumed_valid_samples = 160;
    r.consumed_train_tokens = 4000 * 256;
    r.gigaflos_no_embeds = 12.5;
    r.parameters_in_billions_no_embedding = 0.003;
    return r;
  }

  static const Value& attr(const Value& ns, const std::string& name) {
    const Value* v = ns.state()->find(name);
    if (v == nullptr) throw std::runtime_error("no attribute " + name);
    return *v;
  }

  ScratchDir dir_;
};

std::vector<std::string> attribute_names(const Value& ns) {
  std::vector<std::string> names;
  for (const Value& key : ns.state()->keys()) names.push_back(key.as_string());
  return names;
}

TEST_F(MegatronArgsTest, AttributesInUpstreamOrder) {
  const Value ns = megatron_args_namespace(args(), run());
  ASSERT_TRUE(ns.is(Value::Kind::kObject));
  EXPECT_EQ(ns.qualified_name(), "argparse.Namespace");
  std::vector<std::string> expected = kParsedAttributes;
  expected.insert(expected.end(), kRunAttributes.begin(), kRunAttributes.end());
  EXPECT_EQ(attribute_names(ns), expected);
}

TEST_F(MegatronArgsTest, AttributeValues) {
  const Value ns = megatron_args_namespace(args(), run());
  EXPECT_EQ(attr(ns, "num_layers"), Value::integer(4));
  EXPECT_EQ(attr(ns, "ffn_hidden_size"), Value::integer(1024));
  EXPECT_EQ(attr(ns, "kv_channels"), Value::integer(64));
  EXPECT_EQ(attr(ns, "pad_vocab_size_to"), Value::none());
  EXPECT_EQ(attr(ns, "layernorm_epsilon"), Value::real(1e-5));
  EXPECT_EQ(attr(ns, "onnx_safe"), Value::none());
  EXPECT_EQ(attr(ns, "position_embedding_type"),
            Value::object("megatron.enums", "PositionEmbeddingType", {Value::integer(2)}, false));
  EXPECT_EQ(attr(ns, "weight_decay"), Value::real(0.1));
  EXPECT_EQ(attr(ns, "global_batch_size"), Value::integer(8));
  EXPECT_EQ(attr(ns, "rampup_batch_size"), Value::none());
  EXPECT_EQ(attr(ns, "train_iters"), Value::integer(2000));
  EXPECT_EQ(attr(ns, "optimizer"), Value::string("adam"));
  EXPECT_EQ(attr(ns, "dataloader_type"), Value::string("single"));
  EXPECT_EQ(attr(ns, "lr"), Value::real(6e-4));
  EXPECT_EQ(attr(ns, "lr_decay_style"), Value::string("cosine"));
  EXPECT_EQ(attr(ns, "lr_decay_iters"), Value::integer(2000));  // set by the LR scheduler
  EXPECT_EQ(attr(ns, "lr_decay_samples"), Value::none());
  EXPECT_EQ(attr(ns, "lr_warmup_iters"), Value::integer(100));
  EXPECT_EQ(attr(ns, "save"), Value::string("ckpt"));
  EXPECT_EQ(attr(ns, "no_save_optim"), Value::none());
  EXPECT_EQ(attr(ns, "initial_loss_scale"), Value::integer(4294967296));
  EXPECT_EQ(attr(ns, "loss_scale_window"), Value::integer(1000));
  EXPECT_EQ(attr(ns, "min_loss_scale"), Value::real(1.0));
  EXPECT_EQ(attr(ns, "local_rank"), Value::integer(0));
  EXPECT_EQ(attr(ns, "data_path"),
            Value::list({Value::string("1.0"), Value::string("data/x_text_document")}));
  EXPECT_EQ(attr(ns, "split"), Value::string("969,30,1"));
  EXPECT_EQ(attr(ns, "vocab_file"), Value::string("vocab.json"));
  EXPECT_EQ(attr(ns, "vocab_extra_ids"), Value::integer(0));
  EXPECT_EQ(attr(ns, "encoder_seq_length"), Value::integer(256));
  EXPECT_EQ(attr(ns, "tokenizer_type"), Value::string("GPT2BPETokenizer"));
  EXPECT_EQ(attr(ns, "retriever_report_topk_accuracies"), Value::list());
  EXPECT_EQ(attr(ns, "zero_stage"), Value::real(1.0));
  EXPECT_EQ(attr(ns, "zero_reduce_bucket_size"), Value::real(0.0));
  EXPECT_EQ(attr(ns, "deepspeed"), Value::boolean(true));
  EXPECT_EQ(attr(ns, "deepspeed_config"), Value::string(dir_.file("cfg.json")));
  EXPECT_EQ(attr(ns, "deepscale_config"), Value::none());
  EXPECT_EQ(attr(ns, "rank"), Value::integer(0));
  EXPECT_EQ(attr(ns, "world_size"), Value::integer(1));
  EXPECT_EQ(attr(ns, "data_parallel_size"), Value::integer(1));
  EXPECT_EQ(attr(ns, "valid_weighted_split_names"), Value::none());
  EXPECT_EQ(attr(ns, "params_dtype"), Value::global("torch", "float32"));
  EXPECT_EQ(attr(ns, "consumed_train_samples"), Value::integer(4000));
  EXPECT_EQ(attr(ns, "consumed_valid_samples"), Value::integer(160));
  EXPECT_EQ(attr(ns, "consumed_train_tokens"), Value::integer(1024000));
  EXPECT_EQ(attr(ns, "gigaflos_no_embeds"), Value::real(12.5));
  EXPECT_EQ(attr(ns, "curriculum_learning"), Value::boolean(false));
  EXPECT_EQ(attr(ns, "padded_vocab_size"), Value::integer(50304));
  Value ds = Value::dict();
  ds.set("train_micro_batch_size_per_gpu", Value::integer(4));
  ds.set("train_batch_size", Value::integer(8));
  ds.set("gradient_clipping", Value::real(1.0));
  EXPECT_EQ(attr(ns, "deepspeed_configuration"), ds);
  EXPECT_EQ(attr(ns, "iteration"), Value::integer(500));
  EXPECT_EQ(attr(ns, "do_train"), Value::integer(1));
  EXPECT_EQ(attr(ns, "do_valid"), Value::boolean(true));
}

TEST_F(MegatronArgsTest, GivenFlagsKeepUpstreamTypes) {
  const Value ns = megatron_args_namespace(
      args({"--fp16", "--zero-stage", "1", "--loss-scale-window", "500", "--initial-loss-scale",
            "65536", "--no-save-optim", "--no-masked-softmax-fusion", "--local_rank", "0"},
           R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
               "fp16": {"enabled": true}})"),
      MegatronRunValues{});
  EXPECT_EQ(attr(ns, "params_dtype"), Value::global("torch", "float16"));
  EXPECT_EQ(attr(ns, "zero_stage"), Value::integer(1));
  EXPECT_EQ(attr(ns, "loss_scale_window"), Value::real(500.0));
  EXPECT_EQ(attr(ns, "initial_loss_scale"), Value::real(65536.0));
  EXPECT_EQ(attr(ns, "no_save_optim"), Value::boolean(true));
  EXPECT_EQ(attr(ns, "masked_softmax_fusion"), Value::boolean(false));
  EXPECT_EQ(attr(ns, "gigaflos_no_embeds"), Value::integer(0));
  EXPECT_EQ(attr(ns, "accumulate_allreduce_grads_in_fp32"), Value::boolean(false));
  EXPECT_EQ(attr(ns, "apply_residual_connection_post_layernorm"), Value::boolean(false));
  EXPECT_EQ(attr(ns, "skip_train_iteration_range"), Value::none());
  MegatronRunValues skipping;
  skipping.skip_train_iteration_range = std::vector<train::IterationRange>{{5, 7}, {9, 9}};
  Value deque = Value::object("collections", "deque", {}, false);
  deque.push(Value::list({Value::integer(5), Value::integer(7)}));
  deque.push(Value::list({Value::integer(9), Value::integer(9)}));
  EXPECT_EQ(attr(megatron_args_namespace(args(), skipping), "skip_train_iteration_range"), deque);
  EXPECT_EQ(
      attr(megatron_args_namespace(args({"--apply-residual-connection-post-layernorm"}), run()),
           "apply_residual_connection_post_layernorm"),
      Value::boolean(true));
  EXPECT_EQ(attr(ns, "embed_layernorm"), Value::boolean(false));
  EXPECT_EQ(attr(megatron_args_namespace(args({"--embed-layernorm"}), run()), "embed_layernorm"),
            Value::boolean(true));
  EXPECT_EQ(
      attr(megatron_args_namespace(args({"--vocab-extra-ids", "3"}), run()), "vocab_extra_ids"),
      Value::integer(3));

  const Value bf16 = megatron_args_namespace(
      args({"--bf16"}, R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
                           "bf16": {"enabled": true}})"),
      run());
  EXPECT_EQ(attr(bf16, "params_dtype"), Value::global("torch", "bfloat16"));
  EXPECT_EQ(attr(bf16, "accumulate_allreduce_grads_in_fp32"), Value::boolean(true));
  EXPECT_EQ(attr(bf16, "use_contiguous_buffers_in_ddp"), Value::boolean(true));
}

TEST_F(MegatronArgsTest, SampleBasedTrainingAndWeightedSplits) {
  const std::string groups = dir_.file("valid_groups.txt");
  write_file(groups, "\"V1: 1 0.6:0.8 A\" \"V2: 1 0:1 C\"\n");
  // Mode-2 flags in place of --data-path (validation needs a file for the groups, so they are
  // set after it; the namespace builder reads the -path file as upstream's parser does).
  PretrainArgs a = args();
  a.data_path.reset();
  a.split.reset();
  a.train_weighted_split_paths = std::vector<std::string>{"TRAIN: 0.3 0:0.6 A, 0.7 0:1 B"};
  a.valid_weighted_split_paths_path = groups;
  a.train_iters.reset();
  a.train_samples = 1000;
  a.rampup_batch_size = {"4", "4", "100"};
  MegatronRunValues r = run();
  r.train_iters = 130;
  const Value ns = megatron_args_namespace(a, r);
  const auto list = [](std::vector<std::vector<std::string>> rows) {
    Value out = Value::list();
    for (const auto& row : rows) {
      Value inner = Value::list();
      for (const auto& s : row) inner.push(Value::string(s));
      out.push(std::move(inner));
    }
    return out;
  };
  EXPECT_EQ(attr(ns, "train_iters"), Value::integer(130));
  EXPECT_EQ(attr(ns, "lr_decay_iters"), Value::none());
  EXPECT_EQ(attr(ns, "lr_decay_samples"), Value::integer(1000));
  EXPECT_EQ(attr(ns, "rampup_batch_size"),
            Value::list({Value::string("4"), Value::string("4"), Value::string("100")}));
  EXPECT_EQ(attr(ns, "train_weighted_split_paths"), list({{"A", "B"}}));
  EXPECT_EQ(attr(ns, "valid_weighted_split_paths"), list({{"A"}, {"C"}}));
  EXPECT_EQ(attr(ns, "valid_weighted_split_paths_path"), Value::none());
  EXPECT_EQ(attr(ns, "test_weighted_split_paths"), Value::none());
  EXPECT_EQ(attr(ns, "train_weighted_split_weights"), list({{"0.3", "0.7"}}));
  EXPECT_EQ(attr(ns, "train_weighted_split_splits"), list({{"0:0.6", "0:1"}}));
  EXPECT_EQ(attr(ns, "train_weighted_split_names"), Value::list({Value::string("TRAIN")}));
  EXPECT_EQ(attr(ns, "valid_weighted_split_splits"), list({{"0.6:0.8"}, {"0:1"}}));
  EXPECT_EQ(attr(ns, "valid_weighted_split_names"),
            Value::list({Value::string("V1"), Value::string("V2")}));
  // As upstream's parser: the mode-2 extras follow the last parser attribute, and no
  // valid/test "None" placeholders are added without --data-path.
  std::vector<std::string> names = attribute_names(ns);
  const auto after = std::find(names.begin(), names.end(), "deepspeed_mpi");
  ASSERT_NE(after, names.end());
  EXPECT_EQ(std::vector<std::string>(after + 1, after + 8),
            (std::vector<std::string>{"train_weighted_split_weights", "train_weighted_split_splits",
                                      "train_weighted_split_names", "valid_weighted_split_weights",
                                      "valid_weighted_split_splits", "valid_weighted_split_names",
                                      "rank"}));
}

TEST_F(MegatronArgsTest, RoundTripsThroughATorchFile) {
  const Value ns = megatron_args_namespace(args(), run());
  Value root = Value::dict();
  root.set("args", ns);
  root.set("checkpoint_version", Value::real(3.0));
  const io::TorchFile file = io::TorchFile::from_bytes(io::torch_file_bytes(root, {}), "args.pt");
  EXPECT_EQ(file.root(), root);
  const ValueRef saved = file.root_ref()["args"].object_state();
  EXPECT_EQ(saved["num_layers"].as_int(), 4);
  EXPECT_EQ(saved["lr"].as_float(), 6e-4);
  EXPECT_EQ(saved["tokenizer_type"].as_string(), "GPT2BPETokenizer");
  EXPECT_TRUE(saved["pad_vocab_size_to"].is_none());
  EXPECT_EQ(saved["params_dtype"].value(), Value::global("torch", "float32"));
  // The saved args of the same command line pass the load-time checks.
  check_checkpoint_args(file.root_ref()["args"], args(), 50304, "ckpt/iter_0000500");
}

std::string check_error(const Value& saved, const PretrainArgs& current, int64_t padded = 50304,
                        double version = 3.0) {
  try {
    check_checkpoint_args(ValueRef(saved, "args"), current, padded, "ckpt/iter_0000500", version);
  } catch (const base::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST_F(MegatronArgsTest, CheckpointArgsMismatches) {
  const PretrainArgs current = args();
  const Value saved = megatron_args_namespace(current, run());
  EXPECT_EQ(check_error(saved, current), "no error");
  const std::string prefix = "checkpoint ckpt/iter_0000500: ";
  const auto with = [&](const std::string& name, Value value) {
    Value copy = saved;
    Value state = *copy.state();
    state.set(name, std::move(value));
    copy.set_state(std::move(state));
    return copy;
  };
  EXPECT_EQ(check_error(with("num_layers", Value::integer(2)), current),
            prefix + "num_layers is 2 in the checkpoint but 4 on the command line");
  EXPECT_EQ(check_error(with("hidden_size", Value::integer(512)), current),
            prefix + "hidden_size is 512 in the checkpoint but 256 on the command line");
  EXPECT_EQ(check_error(with("num_attention_heads", Value::integer(8)), current),
            prefix + "num_attention_heads is 8 in the checkpoint but 4 on the command line");
  EXPECT_EQ(check_error(with("position_embedding_type",
                             Value::object("megatron.enums", "PositionEmbeddingType",
                                           {Value::integer(3)}, false)),
                        current),
            prefix +
                "position_embedding_type is alibi in the checkpoint but absolute on the "
                "command line");
  EXPECT_EQ(check_error(with("max_position_embeddings", Value::integer(1024)), current),
            prefix +
                "max_position_embeddings is 1024 in the checkpoint but 256 on the command "
                "line");
  EXPECT_EQ(check_error(with("max_position_embeddings", Value::none()), current),
            prefix +
                "max_position_embeddings is None in the checkpoint but 256 on the command "
                "line");
  EXPECT_EQ(check_error(with("make_vocab_size_divisible_by", Value::integer(64)), current),
            prefix +
                "make_vocab_size_divisible_by is 64 in the checkpoint but 128 on the "
                "command line");
  EXPECT_EQ(check_error(saved, current, 50432),
            prefix + "padded_vocab_size is 50304 in the checkpoint but 50432 on the command line");
  EXPECT_EQ(check_error(with("tokenizer_type", Value::string("PretrainedFromHF")), current),
            prefix +
                "tokenizer_type is PretrainedFromHF in the checkpoint but GPT2BPETokenizer "
                "on the command line");
  EXPECT_EQ(check_error(with("tensor_model_parallel_size", Value::integer(2)), current),
            prefix +
                "tensor_model_parallel_size is 2 in the checkpoint but 1 on the command "
                "line");
  EXPECT_EQ(check_error(with("pipeline_model_parallel_size", Value::integer(4)), current),
            prefix +
                "pipeline_model_parallel_size is 4 in the checkpoint but 1 on the command "
                "line");
  // Before version 3 the tensor size was saved as model_parallel_size.
  EXPECT_EQ(check_error(with("model_parallel_size", Value::integer(2)), current, 50304, 2.0),
            prefix +
                "tensor_model_parallel_size is 2 in the checkpoint but 1 on the command "
                "line");
  EXPECT_EQ(check_error(saved, current, 50304, 2.0),
            prefix + "its args have no model_parallel_size");
  // Beyond upstream: the residual ordering, where the saved args have it.
  EXPECT_EQ(
      check_error(with("apply_residual_connection_post_layernorm", Value::boolean(true)), current),
      prefix +
          "apply_residual_connection_post_layernorm is True in the checkpoint but False "
          "on the command line");
  EXPECT_EQ(check_error(with("embed_layernorm", Value::boolean(true)), current),
            prefix + "embed_layernorm is True in the checkpoint but False on the command line");
  {
    Value without = saved;
    Value state = Value::dict();
    for (const Value& key : saved.state()->keys()) {
      if (key.as_string() != "apply_residual_connection_post_layernorm") {
        state.set(key.as_string(), *saved.state()->find(key.as_string()));
      }
    }
    without.set_state(std::move(state));
    EXPECT_EQ(check_error(without, current), "no error");
  }
  // ints and floats compare by value, as Python's ==.
  EXPECT_EQ(check_error(with("num_layers", Value::real(4.0)), current), "no error");
  // Python >= 3.11 pickles enum members through getattr.
  EXPECT_EQ(
      check_error(with("position_embedding_type",
                       Value::object("builtins", "getattr",
                                     {Value::global("megatron.enums", "PositionEmbeddingType"),
                                      Value::string("absolute")},
                                     false)),
                  current),
      "no error");
  // Without a vocab file the tokenizer attributes are not compared.
  PretrainArgs no_vocab = current;
  no_vocab.tokenizer.vocab_file.clear();
  EXPECT_EQ(check_error(with("tokenizer_type", Value::string("x")), no_vocab, 1), "no error");
  // --universal-checkpoint skips every check.
  PretrainArgs universal = current;
  universal.universal_checkpoint = true;
  EXPECT_EQ(check_error(with("num_layers", Value::integer(2)), universal), "no error");
}

}  // namespace
}  // namespace mds::ckpt
