#include "ckpt/megatron_args.h"

#include <vector>

#include "base/error.h"
#include "ckpt/json_value.h"
#include "config/json_document.h"
#include "data/dataset_split.h"

namespace mds::ckpt {
namespace {

using config::PretrainArgs;
using io::Value;

Value opt_int(const std::optional<int64_t>& v) {
  return v ? Value::integer(*v) : Value::none();
}
Value opt_real(const std::optional<double>& v) {
  return v ? Value::real(*v) : Value::none();
}
Value opt_text(const std::optional<std::string>& v) {
  return v ? Value::string(*v) : Value::none();
}
Value text_or_none(const std::string& v) {
  return v.empty() ? Value::none() : Value::string(v);
}
Value strings(const std::vector<std::string>& items) {
  Value list = Value::list();
  for (const std::string& item : items) list.push(Value::string(item));
  return list;
}
Value opt_strings(const std::optional<std::vector<std::string>>& v) {
  return v ? strings(*v) : Value::none();
}
// collections.deque([[start, end], ...]) as upstream's parser leaves it (pickled as the class
// called with no arguments, then the items appended).
Value skip_ranges_value(const std::optional<std::vector<train::IterationRange>>& ranges) {
  if (!ranges) return Value::none();
  Value deque = Value::object("collections", "deque", {}, false);
  for (const train::IterationRange& range : *ranges) {
    deque.push(Value::list({Value::integer(range.start), Value::integer(range.end)}));
  }
  return deque;
}
// action='store_true' with default=None: None unless given.
Value true_or_none(bool given) {
  return given ? Value::boolean(true) : Value::none();
}
// type=float flags whose default is an int literal keep the int until given.
Value real_unless_default(const PretrainArgs& a, const char* flag, double value) {
  if (a.was_given(flag)) return Value::real(value);
  return Value::integer(static_cast<int64_t>(value));
}

Value position_embedding_value(config::PositionEmbeddingType type) {
  // Enum members pickle as a call of the class with the member's value (Python < 3.11).
  return Value::object("megatron.enums", "PositionEmbeddingType",
                       {Value::integer(static_cast<int64_t>(type))}, false);
}

Value params_dtype_value(config::ParamsDtype dtype) {
  switch (dtype) {
    case config::ParamsDtype::kFloat16:
      return Value::global("torch", "float16");
    case config::ParamsDtype::kBFloat16:
      return Value::global("torch", "bfloat16");
    case config::ParamsDtype::kFloat32:
      break;
  }
  return Value::global("torch", "float32");
}

std::vector<std::string> split_whitespace(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

std::vector<std::string> split_on(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

// What upstream's parse_data_paths action stores for mode-2 groups: per group its name and, per
// dataset, the weight, START:END and prefix strings.
struct WeightedSplitAttributes {
  Value paths = Value::list();
  Value weights = Value::list();
  Value splits = Value::list();
  Value names = Value::list();
};

WeightedSplitAttributes weighted_split_attributes(const std::vector<std::string>& groups,
                                                  const char* flag) {
  WeightedSplitAttributes out;
  for (const std::string& group : groups) {
    const std::size_t colon = group.find(':');
    const std::string name = group.substr(0, colon);
    const std::string rest = colon == std::string::npos ? "" : group.substr(colon + 1);
    Value paths = Value::list();
    Value weights = Value::list();
    Value splits = Value::list();
    for (const std::string& dataset : split_on(rest, ',')) {
      const std::vector<std::string> words = split_whitespace(dataset);
      if (words.size() != 3) {
        base::fail(flag, ": '", dataset, "' is not 'WEIGHT START:END PREFIX'");
      }
      weights.push(Value::string(words[0]));
      splits.push(Value::string(words[1]));
      paths.push(Value::string(words[2]));
    }
    out.paths.push(std::move(paths));
    out.weights.push(std::move(weights));
    out.splits.push(std::move(splits));
    out.names.push(Value::string(name));
  }
  return out;
}

void add_network_size(Value& ns, const PretrainArgs& a) {
  ns.set("num_layers", Value::integer(a.num_layers));
  ns.set("hidden_size", Value::integer(a.hidden_size));
  ns.set("ffn_hidden_size", opt_int(a.ffn_hidden_size));
  ns.set("num_attention_heads", Value::integer(a.num_attention_heads));
  ns.set("kv_channels", opt_int(a.kv_channels));
  ns.set("max_position_embeddings", opt_int(a.max_position_embeddings));
  ns.set("make_vocab_size_divisible_by", Value::integer(a.tokenizer.make_vocab_size_divisible_by));
  ns.set("pad_vocab_size_to", opt_int(a.tokenizer.pad_vocab_size_to));
  ns.set("layernorm_epsilon", Value::real(a.layernorm_epsilon));
  ns.set("sync_tp_duplicated_parameters", Value::boolean(a.sync_tp_duplicated_parameters));
  ns.set("apply_residual_connection_post_layernorm",
         Value::boolean(a.apply_residual_connection_post_layernorm));
  ns.set("embed_layernorm", Value::boolean(a.embed_layernorm));
  ns.set("openai_gelu", Value::boolean(a.openai_gelu));
  ns.set("onnx_safe", Value::none());
  ns.set("bert_binary_head", Value::boolean(true));
  ns.set("position_embedding_type", position_embedding_value(a.position_embedding_type));
  ns.set("glu_activation", opt_text(a.glu_activation));
  ns.set("kill_switch_path", opt_text(a.kill_switch_path));
  ns.set("log_level", opt_text(a.log_level));
  ns.set("log_level_replica", opt_text(a.log_level_replica));
}

void add_regularization(Value& ns, const PretrainArgs& a) {
  ns.set("attention_dropout", Value::real(a.attention_dropout));
  ns.set("hidden_dropout", Value::real(a.hidden_dropout));
  ns.set("weight_decay", Value::real(a.weight_decay));
  ns.set("clip_grad", Value::real(a.clip_grad));
  ns.set("adam_beta1", Value::real(a.adam_beta1));
  ns.set("adam_beta2", Value::real(a.adam_beta2));
  ns.set("adam_eps", Value::real(a.adam_eps));
  ns.set("sgd_momentum", Value::real(a.sgd_momentum));
}

void add_training(Value& ns, const PretrainArgs& a, const MegatronRunValues& run) {
  ns.set("micro_batch_size", Value::integer(a.micro_batch_size));
  ns.set("global_batch_size", opt_int(a.global_batch_size));
  ns.set("rampup_batch_size", opt_strings(a.rampup_batch_size));
  ns.set("checkpoint_activations", Value::boolean(a.checkpoint_activations));
  ns.set("distribute_checkpointed_activations",
         Value::boolean(a.distribute_checkpointed_activations));
  ns.set("checkpoint_num_layers", Value::integer(a.checkpoint_num_layers));
  // update_train_iters fills train_iters in for sample-based training.
  ns.set("train_iters", opt_int(a.train_iters ? a.train_iters : run.train_iters));
  ns.set("train_samples", opt_int(a.train_samples));
  ns.set("train_tokens", opt_int(a.train_tokens));
  ns.set("log_interval", Value::integer(a.log_interval));
  ns.set("exit_interval", opt_int(a.exit_interval));
  ns.set("exit_duration_in_mins", opt_int(a.exit_duration_in_mins));
  ns.set("tensorboard_dir", opt_text(a.tensorboard_dir));
  ns.set("masked_softmax_fusion", Value::boolean(a.masked_softmax_fusion));
  ns.set("bias_gelu_fusion", Value::boolean(a.bias_gelu_fusion));
  ns.set("bias_dropout_fusion", Value::boolean(a.bias_dropout_fusion));
  ns.set("optimizer", Value::string(a.optimizer));
  ns.set("use_bnb_optimizer", Value::boolean(false));
  ns.set("dataloader_type", Value::string(a.dataloader_type));
  ns.set("cpu_optimizer", Value::boolean(false));
  ns.set("cpu_torch_adam", Value::boolean(false));
  ns.set("codecarbon_dir", opt_text(a.codecarbon_dir));
  ns.set("eval_only", a.eval_only ? Value::boolean(a.evaluate_only) : Value::none());
  ns.set("skip_train_iteration_range", skip_ranges_value(run.skip_train_iteration_range));
  ns.set("inference", Value::boolean(false));
  ns.set("abort_on_unmet_fused_kernel_constraints",
         Value::boolean(a.abort_on_unmet_fused_kernel_constraints));
  ns.set("pp_partition_method", opt_text(a.pp_partition_method));
  ns.set("seed", Value::integer(a.seed));
  ns.set("init_method_std", Value::real(a.init_method_std));
  ns.set("init_method_xavier_uniform", Value::boolean(false));
}

void add_learning_rate(Value& ns, const PretrainArgs& a) {
  ns.set("lr", opt_real(a.lr));
  ns.set("lr_decay_style", Value::string(a.lr_decay_style));
  // get_learning_rate_scheduler defaults the decay length to the training length.
  ns.set("lr_decay_iters", opt_int(a.lr_decay_iters ? a.lr_decay_iters
                                   : a.train_iters  ? a.train_iters
                                                    : std::nullopt));
  ns.set("lr_decay_samples", opt_int(a.lr_decay_samples ? a.lr_decay_samples
                                     : a.train_samples  ? a.train_samples
                                                        : std::nullopt));
  ns.set("lr_decay_tokens", opt_int(a.lr_decay_tokens));
  ns.set("lr_warmup_fraction", opt_real(a.lr_warmup_fraction));
  ns.set("lr_warmup_iters", Value::integer(a.lr_warmup_iters));
  ns.set("lr_warmup_samples", Value::integer(a.lr_warmup_samples));
  ns.set("min_lr", Value::real(a.min_lr));
  ns.set("override_lr_scheduler", Value::boolean(a.override_lr_scheduler));
  ns.set("use_checkpoint_lr_scheduler", Value::boolean(a.use_checkpoint_lr_scheduler));
  ns.set("universal_checkpoint", Value::boolean(a.universal_checkpoint));
}

void add_checkpointing_and_precision(Value& ns, const PretrainArgs& a) {
  ns.set("save", opt_text(a.save));
  ns.set("save_interval", opt_int(a.save_interval));
  ns.set("no_save_optim", true_or_none(a.no_save_optim));
  ns.set("no_save_rng", true_or_none(a.no_save_rng));
  ns.set("load", opt_text(a.load));
  ns.set("no_load_optim", true_or_none(a.no_load_optim));
  ns.set("no_load_rng", true_or_none(a.no_load_rng));
  ns.set("finetune", Value::boolean(a.finetune));
  ns.set("fp16", Value::boolean(a.fp16));
  ns.set("bf16", Value::boolean(a.bf16));
  ns.set("loss_scale", opt_real(a.loss_scale));
  ns.set("initial_loss_scale",
         real_unless_default(a, "--initial-loss-scale", a.initial_loss_scale));
  ns.set("min_loss_scale", Value::real(a.min_loss_scale));
  ns.set("loss_scale_window", real_unless_default(a, "--loss-scale-window", a.loss_scale_window));
  ns.set("hysteresis", Value::integer(a.hysteresis));
  ns.set("fp32_residual_connection", Value::boolean(false));
  ns.set("apply_query_key_layer_scaling", Value::boolean(a.apply_query_key_layer_scaling));
  ns.set("attention_softmax_in_fp32", Value::boolean(a.attention_softmax_in_fp32));
  ns.set("accumulate_allreduce_grads_in_fp32",
         Value::boolean(a.accumulate_allreduce_grads_in_fp32));
  ns.set("fp16_lm_cross_entropy", Value::boolean(a.fp16_lm_cross_entropy));
}

void add_distributed_and_validation(Value& ns, const PretrainArgs& a) {
  ns.set("tensor_model_parallel_size", Value::integer(a.tensor_model_parallel_size));
  ns.set("pipeline_model_parallel_size", Value::integer(a.pipeline_model_parallel_size));
  ns.set("num_layers_per_virtual_pipeline_stage", Value::none());
  ns.set("distributed_backend", Value::string(a.distributed_backend));
  ns.set("DDP_impl", Value::string(a.DDP_impl));
  ns.set("use_contiguous_buffers_in_ddp", Value::boolean(a.use_contiguous_buffers_in_ddp));
  ns.set("scatter_gather_tensors_in_pipeline",
         Value::boolean(a.scatter_gather_tensors_in_pipeline));
  // DeepSpeed's engine overwrites it with $LOCAL_RANK (0 for one process).
  ns.set("local_rank", Value::integer(a.local_rank.value_or(0)));
  ns.set("lazy_mpu_init", Value::none());
  ns.set("use_cpu_initialization", Value::none());
  ns.set("eval_iters", Value::integer(a.eval_iters));
  ns.set("eval_interval", Value::integer(a.eval_interval));
}

void add_data(Value& ns, const PretrainArgs& a,
              const std::vector<std::optional<WeightedSplitAttributes>>& weighted) {
  ns.set("data_path", opt_strings(a.data_path));
  ns.set("split", opt_text(a.split));
  const char* kinds[] = {"train", "valid", "test"};
  for (std::size_t i = 0; i < 3; ++i) {
    ns.set(std::string(kinds[i]) + "_weighted_split_paths",
           weighted[i] ? weighted[i]->paths : Value::none());
  }
  ns.set("train_weighted_split_paths_path", Value::none());  // the parser action never sets it
  ns.set("valid_weighted_split_paths_path", Value::none());
  ns.set("test_weighted_split_paths_path", Value::none());
  ns.set("log_path", opt_text(a.log_path));
  ns.set("vocab_file", text_or_none(a.tokenizer.vocab_file));
  ns.set("merge_file", text_or_none(a.tokenizer.merge_file));
  ns.set("vocab_extra_ids", Value::integer(a.tokenizer.vocab_extra_ids));
  ns.set("seq_length", opt_int(a.seq_length));
  ns.set("encoder_seq_length", opt_int(a.encoder_seq_length));
  ns.set("decoder_seq_length", Value::none());
  ns.set("retriever_seq_length", Value::integer(256));
  ns.set("sample_rate", Value::real(1.0));
  ns.set("mask_prob", Value::real(0.15));
  ns.set("short_seq_prob", Value::real(0.1));
  ns.set("mmap_warmup", Value::boolean(a.mmap_warmup));
  ns.set("num_workers", Value::integer(a.num_workers));
  ns.set("valid_num_workers", Value::integer(a.valid_num_workers));
  ns.set("tokenizer_type", Value::string(a.tokenizer.tokenizer_type));
  ns.set("tokenizer_name_or_path", text_or_none(a.tokenizer.tokenizer_name_or_path));
  ns.set("data_impl", Value::string(a.data_impl));
  ns.set("reset_position_ids", Value::boolean(a.reset_position_ids));
  ns.set("reset_attention_mask", Value::boolean(a.reset_attention_mask));
  ns.set("eod_mask_loss", Value::boolean(a.eod_mask_loss));
  ns.set("loss_on_targets_only", Value::boolean(false));
  ns.set("reweight_loss_based_on_position_frequency", Value::boolean(false));
  ns.set("noise_density", Value::none());
  ns.set("mean_noise_span_length", Value::none());
}

// Upstream's autoresume, biencoder and ViT groups: always their defaults (mds refuses them).
void add_unused_model_groups(Value& ns) {
  ns.set("adlr_autoresume", Value::boolean(false));
  ns.set("adlr_autoresume_interval", Value::integer(1000));
  ns.set("ict_head_size", Value::none());
  ns.set("biencoder_projection_dim", Value::integer(0));
  ns.set("biencoder_shared_query_context_model", Value::boolean(false));
  ns.set("ict_load", Value::none());
  ns.set("bert_load", Value::none());
  ns.set("titles_data_path", Value::none());
  ns.set("query_in_block_prob", Value::real(0.1));
  ns.set("use_one_sent_docs", Value::boolean(false));
  ns.set("evidence_data_path", Value::none());
  ns.set("retriever_report_topk_accuracies", Value::list());
  ns.set("retriever_score_scaling", Value::boolean(false));
  ns.set("block_data_path", Value::none());
  ns.set("embedding_path", Value::none());
  ns.set("indexer_batch_size", Value::integer(128));
  ns.set("indexer_log_interval", Value::integer(1000));
  ns.set("num_classes", Value::integer(1000));
  ns.set("img_dim", Value::integer(224));
  ns.set("num_channels", Value::integer(3));
  ns.set("patch_dim", Value::integer(16));
}

void add_logging_zero_memory(Value& ns, const PretrainArgs& a) {
  ns.set("log_params_norm", Value::boolean(a.log_params_norm));
  ns.set("log_num_zeros_in_grad", Value::boolean(a.log_num_zeros_in_grad));
  ns.set("tensorboard_log_interval", Value::integer(a.tensorboard_log_interval));
  ns.set("tensorboard_queue_size", Value::integer(a.tensorboard_queue_size));
  ns.set("log_timers_to_tensorboard", Value::boolean(a.log_timers_to_tensorboard));
  ns.set("log_batch_size_to_tensorboard", Value::boolean(a.log_batch_size_to_tensorboard));
  ns.set("log_learning_rate_to_tensorboard", Value::boolean(a.log_learning_rate_to_tensorboard));
  ns.set("log_loss_scale_to_tensorboard", Value::boolean(a.log_loss_scale_to_tensorboard));
  ns.set("log_validation_ppl_to_tensorboard", Value::boolean(a.log_validation_ppl_to_tensorboard));
  // Upstream's defaults for these int flags are the floats 1.0 and 0.0.
  ns.set("zero_stage", a.zero_stage ? Value::integer(*a.zero_stage) : Value::real(1.0));
  ns.set("zero_reduce_scatter", Value::boolean(a.zero_reduce_scatter));
  ns.set("zero_contigious_gradients", Value::boolean(a.zero_contigious_gradients));
  ns.set("zero_reduce_bucket_size",
         a.zero_reduce_bucket_size ? Value::integer(*a.zero_reduce_bucket_size) : Value::real(0.0));
  ns.set("zero_allgather_bucket_size", a.zero_allgather_bucket_size
                                           ? Value::integer(*a.zero_allgather_bucket_size)
                                           : Value::real(0.0));
  ns.set("remote_device", Value::string(a.remote_device));
  ns.set("use_pin_memory", Value::boolean(a.use_pin_memory));
  ns.set("scattered_embeddings", Value::boolean(a.scattered_embeddings));
  ns.set("split_transformers", Value::boolean(a.split_transformers));
  ns.set("memory_centric_tiled_linear", Value::boolean(a.memory_centric_tiled_linear));
  ns.set("tile_factor", Value::integer(a.tile_factor));
}

void add_checkpointing_and_deepspeed_flags(Value& ns, const PretrainArgs& a) {
  ns.set("deepspeed_activation_checkpointing",
         Value::boolean(a.deepspeed_activation_checkpointing));
  ns.set("partition_activations", Value::boolean(false));
  ns.set("contigious_checkpointing", Value::boolean(false));
  ns.set("checkpoint_in_cpu", Value::boolean(a.checkpoint_in_cpu));
  ns.set("synchronize_each_layer", Value::boolean(a.synchronize_each_layer));
  ns.set("profile_backward", Value::boolean(a.profile_backward));
  ns.set("deepspeed", Value::boolean(a.deepspeed));
  ns.set("deepspeed_config", opt_text(a.deepspeed_config));
  ns.set("deepscale", Value::boolean(false));
  ns.set("deepscale_config", Value::none());
  ns.set("deepspeed_mpi", Value::boolean(a.deepspeed_mpi));
}

void add_derived(Value& ns, const PretrainArgs& a, const MegatronRunValues& run) {
  ns.set("rank", Value::integer(a.rank));
  ns.set("world_size", Value::integer(a.world_size));
  ns.set("data_parallel_size", Value::integer(a.data_parallel_size));
  if (a.data_path) {
    for (const char* name : {"valid_weighted_split_names", "valid_weighted_split_weights",
                             "valid_weighted_split_splits", "test_weighted_split_names",
                             "test_weighted_split_weights", "test_weighted_split_splits"}) {
      ns.set(name, Value::none());
    }
  }
  ns.set("virtual_pipeline_model_parallel_size", Value::none());
  ns.set("params_dtype", params_dtype_value(a.params_dtype));
  ns.set("consumed_train_samples", Value::integer(run.consumed_train_samples));
  ns.set("consumed_valid_samples", Value::integer(run.consumed_valid_samples));
  ns.set("consumed_train_tokens", Value::integer(run.consumed_train_tokens));
  ns.set("gigaflos_no_embeds",
         run.gigaflos_no_embeds == 0.0 ? Value::integer(0) : Value::real(run.gigaflos_no_embeds));
  ns.set("curriculum_learning", Value::boolean(false));
  ns.set("padded_vocab_size", Value::integer(run.padded_vocab_size));
  if (a.deepspeed_configuration) {
    const config::DeepSpeedConfig& ds = *a.deepspeed_configuration;
    ns.set("deepspeed_configuration", json_to_value(config::parse_json(ds.json_text, ds.source)));
  }
  ns.set("pretrain_causal_attention", Value::boolean(true));
  ns.set("iteration", Value::integer(run.iteration));
  ns.set("parameters_in_billions_no_embedding",
         Value::real(run.parameters_in_billions_no_embedding));
  ns.set("do_train", Value::integer(run.do_train ? 1 : 0));  // a tensor's .item() upstream
  ns.set("do_valid", Value::boolean(run.do_valid));
  ns.set("do_test", Value::boolean(run.do_test));
}

}  // namespace

io::Value megatron_args_namespace(const config::PretrainArgs& a, const MegatronRunValues& run) {
  const char* kinds[] = {"train", "valid", "test"};
  const std::optional<std::vector<std::string>>* groups[] = {
      &a.train_weighted_split_paths, &a.valid_weighted_split_paths, &a.test_weighted_split_paths};
  const std::optional<std::string>* files[] = {&a.train_weighted_split_paths_path,
                                               &a.valid_weighted_split_paths_path,
                                               &a.test_weighted_split_paths_path};
  std::vector<std::optional<WeightedSplitAttributes>> weighted(3);
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string flag = "--" + std::string(kinds[i]) + "-weighted-split-paths";
    if (const auto strings = data::weighted_split_groups(*groups[i], *files[i], flag)) {
      weighted[i] = weighted_split_attributes(*strings, flag.c_str());
    }
  }

  Value ns = Value::dict();
  add_network_size(ns, a);
  add_regularization(ns, a);
  add_training(ns, a, run);
  add_learning_rate(ns, a);
  add_checkpointing_and_precision(ns, a);
  add_distributed_and_validation(ns, a);
  add_data(ns, a, weighted);
  add_unused_model_groups(ns);
  add_logging_zero_memory(ns, a);
  add_checkpointing_and_deepspeed_flags(ns, a);
  // The parser action of a mode-2 flag adds these after all defaults.
  for (std::size_t i = 0; i < 3; ++i) {
    if (!weighted[i]) continue;
    const std::string kind = kinds[i];
    ns.set(kind + "_weighted_split_weights", weighted[i]->weights);
    ns.set(kind + "_weighted_split_splits", weighted[i]->splits);
    ns.set(kind + "_weighted_split_names", weighted[i]->names);
  }
  add_derived(ns, a, run);
  return Value::namespace_object(std::move(ns));
}

}  // namespace mds::ckpt
