// validate_pretrain_args: megatron/arguments.py's post-processing for one process (in upstream's
// order, so a command line upstream refuses fails with the same rule), then what mds refuses, then
// the DeepSpeed JSON cross-checks of training.md §7 and the notes about flags without effect.
#include <cctype>
#include <initializer_list>
#include <string>

#include "base/error.h"
#include "config/pretrain_args.h"

namespace mds::config {
namespace {

void check_process_layout(PretrainArgs& a, const ProcessEnv& env) {
  if (env.world_size < 1) base::fail("the world size is ", env.world_size, ", not positive");
  if (env.rank < 0 || env.rank >= env.world_size) {
    base::fail("rank ", env.rank, " is outside a world of ", env.world_size, " processes");
  }
  a.rank = env.rank;
  a.world_size = env.world_size;
  if (a.tensor_model_parallel_size < 1) {
    base::fail("--tensor-model-parallel-size must be >= 1, got ", a.tensor_model_parallel_size);
  }
  if (a.pipeline_model_parallel_size < 1) {
    base::fail("--pipeline-model-parallel-size must be >= 1, got ", a.pipeline_model_parallel_size);
  }
  // Upstream quietly uses min(degree, world size); a degree the world cannot hold means the job
  // was started with the wrong number of processes, so say so.
  const std::int64_t model_parallel = a.tensor_model_parallel_size * a.pipeline_model_parallel_size;
  if (a.world_size % model_parallel != 0) {
    base::fail("the world size ", a.world_size,
               " is not divisible by --tensor-model-parallel-size ", a.tensor_model_parallel_size,
               " × --pipeline-model-parallel-size ", a.pipeline_model_parallel_size);
  }
  a.data_parallel_size =
      a.world_size / (a.tensor_model_parallel_size * a.pipeline_model_parallel_size);
  if (a.world_size == 1 && a.local_rank && *a.local_rank != 0) {
    base::fail("--local_rank ", *a.local_rank, ": a single process has local rank 0");
  }
}

void check_data_modes(PretrainArgs& a) {
  const char* exclusive =
      "--data-path/--split (mode 1) and --(train|valid|test)-weighted-split-paths (mode 2) "
      "cannot be used together";
  const auto pair_given = [&](const auto& strings, const auto& file, const char* flag) {
    if (strings && file) base::fail("give ", flag, " or ", flag, "-path, not both");
    return strings.has_value() || file.has_value();
  };
  const bool train = pair_given(a.train_weighted_split_paths, a.train_weighted_split_paths_path,
                                "--train-weighted-split-paths");
  const bool valid = pair_given(a.valid_weighted_split_paths, a.valid_weighted_split_paths_path,
                                "--valid-weighted-split-paths");
  const bool test = pair_given(a.test_weighted_split_paths, a.test_weighted_split_paths_path,
                               "--test-weighted-split-paths");
  if (a.data_path) {
    if (a.data_path->empty()) base::fail("--data-path needs at least one dataset prefix");
    if (train) base::fail(exclusive);
    if (!a.split) a.split = "969, 30, 1";
  }
  if ((train || valid || test) && (a.data_path || a.split)) base::fail(exclusive);
  if (a.train_weighted_split_paths && a.train_weighted_split_paths->size() != 1) {
    base::fail("--train-weighted-split-paths takes exactly one dataset group, got ",
               a.train_weighted_split_paths->size());
  }
  if (!a.data_path && !train) {
    base::fail("training data is required: give --data-path (or --train-weighted-split-paths)");
  }
}

void check_batch_and_precision(PretrainArgs& a) {
  if (a.micro_batch_size <= 0)
    base::fail("--micro-batch-size must be > 0, got ", a.micro_batch_size);
  if (!a.global_batch_size) a.global_batch_size = a.micro_batch_size * a.data_parallel_size;
  if (*a.global_batch_size <= 0) {
    base::fail("--global-batch-size must be > 0, got ", *a.global_batch_size);
  }
  if (a.fp16 && a.bf16) base::fail("--fp16 and --bf16 cannot both be given");
  a.params_dtype =
      a.fp16 ? ParamsDtype::kFloat16 : (a.bf16 ? ParamsDtype::kBFloat16 : ParamsDtype::kFloat32);
  if (a.bf16) a.accumulate_allreduce_grads_in_fp32 = true;
  if (a.accumulate_allreduce_grads_in_fp32) {
    if (a.DDP_impl != "local") {
      base::fail("--DDP-impl ", a.DDP_impl, ": fp32 gradient accumulation",
                 a.bf16 ? " (forced by --bf16)" : "", " needs --DDP-impl local");
    }
    a.use_contiguous_buffers_in_ddp = true;
  }
}

void check_training_length(const PretrainArgs& a) {
  if (a.train_iters && a.train_samples) {
    base::fail("give one of --train-iters and --train-samples, not both");
  }
  if (!a.train_iters && !a.train_samples) {
    base::fail("the training length is required: give --train-iters or --train-samples");
  }
  if (a.train_iters) {
    if (*a.train_iters <= 0) base::fail("--train-iters must be > 0, got ", *a.train_iters);
    if (a.lr_decay_samples) {
      base::fail(
          "--lr-decay-samples needs sample-based training (--train-samples); with "
          "--train-iters use --lr-decay-iters");
    }
    if (a.lr_warmup_samples != 0) {
      base::fail(
          "--lr-warmup-samples needs sample-based training (--train-samples); with "
          "--train-iters use --lr-warmup-iters");
    }
    if (a.rampup_batch_size) {
      base::fail("--rampup-batch-size needs sample-based training (--train-samples)");
    }
    if (a.lr_warmup_fraction && a.lr_warmup_iters != 0) {
      base::fail("give one of --lr-warmup-fraction and --lr-warmup-iters, not both");
    }
  } else {
    if (*a.train_samples <= 0) base::fail("--train-samples must be > 0, got ", *a.train_samples);
    if (a.lr_decay_iters) {
      base::fail(
          "--lr-decay-iters needs iteration-based training (--train-iters); with "
          "--train-samples use --lr-decay-samples");
    }
    if (a.lr_warmup_iters != 0) {
      base::fail(
          "--lr-warmup-iters needs iteration-based training (--train-iters); with "
          "--train-samples use --lr-warmup-samples");
    }
    if (a.lr_warmup_fraction && a.lr_warmup_samples != 0) {
      base::fail("give one of --lr-warmup-fraction and --lr-warmup-samples, not both");
    }
  }
}

}  // namespace

void validate_model_shape(PretrainArgs& a) {
  const auto positive = [](const char* flag, int64_t value) {
    if (value <= 0) base::fail(flag, " must be > 0, got ", value);
  };
  positive("--num-layers", a.num_layers);
  positive("--hidden-size", a.hidden_size);
  positive("--num-attention-heads", a.num_attention_heads);
  if (!a.ffn_hidden_size) a.ffn_hidden_size = 4 * a.hidden_size;
  positive("--ffn-hidden-size", *a.ffn_hidden_size);
  if (a.hidden_size % a.num_attention_heads != 0) {
    base::fail("--hidden-size ", a.hidden_size, " is not divisible by --num-attention-heads ",
               a.num_attention_heads);
  }
  const int64_t head_dim = a.hidden_size / a.num_attention_heads;
  if (!a.kv_channels) a.kv_channels = head_dim;
  if (*a.kv_channels != head_dim) {
    base::fail("--kv-channels ", *a.kv_channels,
               " differs from --hidden-size / "
               "--num-attention-heads = ",
               head_dim, "; mds implements only that head size");
  }
  if (a.seq_length) {
    if (a.encoder_seq_length) {
      base::fail("give --seq-length or --encoder-seq-length, not both");
    }
    a.encoder_seq_length = a.seq_length;
  } else {
    if (!a.encoder_seq_length) base::fail("--seq-length is required");
    a.seq_length = a.encoder_seq_length;
  }
  positive("--seq-length", *a.seq_length);
  const std::string type(to_string(a.position_embedding_type));
  if (a.position_embedding_type == PositionEmbeddingType::kRotary) {
    if (a.max_position_embeddings) {
      base::fail(
          "--max-position-embeddings must not be given with --position-embedding-type "
          "rotary");
    }
  } else {
    if (!a.max_position_embeddings) {
      base::fail("--max-position-embeddings is required with --position-embedding-type ", type);
    }
    if (*a.max_position_embeddings < *a.seq_length) {
      base::fail("--max-position-embeddings ", *a.max_position_embeddings,
                 " is smaller than --seq-length ", *a.seq_length);
    }
  }
  if (a.position_embedding_type == PositionEmbeddingType::kRotary) {
    base::fail(
        "--position-embedding-type rotary: only absolute and alibi positions are "
        "implemented in mds yet");
  }
}

namespace {

void check_remaining_upstream_rules(const PretrainArgs& a) {
  if (a.lr && a.min_lr > *a.lr) {
    base::fail("--min-lr ", a.min_lr, " is larger than --lr ", *a.lr);
  }
  if (a.save && !a.save_interval) base::fail("--save needs --save-interval");
  if (a.fp16_lm_cross_entropy && !a.fp16) base::fail("--fp16-lm-cross-entropy needs --fp16");
  if (a.distribute_checkpointed_activations && !a.checkpoint_activations) {
    base::fail("--distribute-checkpointed-activations needs --checkpoint-activations");
  }
  if (a.glu_activation) {
    if (a.bias_gelu_fusion) {
      base::fail("--glu-activation needs --no-bias-gelu-fusion (as upstream)");
    }
    base::fail("--glu-activation ", *a.glu_activation, ": GLU MLPs are not implemented in mds yet");
  }
}

// What upstream accepts but mds does not run.
void refuse_unimplemented(const PretrainArgs& a) {
  if (!a.deepspeed) {
    base::fail(
        "--deepspeed is required: the Megatron-native path (training without --deepspeed) "
        "is not implemented in mds yet");
  }
  if (!a.deepspeed_config) base::fail("--deepspeed needs --deepspeed_config");
  if (!a.lr) base::fail("--lr is required for training");
  if (a.optimizer != "adam") {
    base::fail("--optimizer ", a.optimizer, " is not implemented in mds yet; use adam");
  }
  if (a.dataloader_type != "single") {
    base::fail("--dataloader-type ", a.dataloader_type,
               " is not implemented (its order comes from torch's randperm); use single");
  }
  if (a.zero_stage && *a.zero_stage == 3) {
    base::fail(
        "--zero-stage 3 (building the model under ZeRO-3) is not supported; the "
        "DeepSpeed JSON's zero_optimization.stage selects ZeRO 0, 1 or 2");
  }
  const std::string& tokenizer = a.tokenizer.tokenizer_type;
  if (tokenizer != "GPT2BPETokenizer" && tokenizer != "SentencePieceTokenizer" &&
      tokenizer != "PretrainedFromHF") {
    base::fail("--tokenizer-type ", tokenizer,
               " is not supported by pretrain; use GPT2BPETokenizer, SentencePieceTokenizer or "
               "PretrainedFromHF");
  }
  const auto positive = [](const char* flag, int64_t value) {
    if (value <= 0) base::fail(flag, " must be > 0 (upstream divides by it), got ", value);
  };
  positive("--log-interval", a.log_interval);
  positive("--eval-interval", a.eval_interval);
  if (a.eval_iters < 0) base::fail("--eval-iters must be >= 0, got ", a.eval_iters);
}

void check_deepspeed_config(PretrainArgs& a) {
  DeepSpeedConfig ds = load_deepspeed_config(*a.deepspeed_config);
  check_precision_matches(ds, a.fp16, a.bf16);
  // Upstream's pipeline engine refuses stage 2; mds runs it (docs/parallelism.md).
  const BatchSizes sizes = resolve_batch_sizes(ds, a.data_parallel_size);
  if (sizes.micro_batch_size != a.micro_batch_size) {
    base::fail(ds.source, ": train_micro_batch_size_per_gpu is ", sizes.micro_batch_size,
               " but --micro-batch-size is ", a.micro_batch_size);
  }
  if (sizes.train_batch_size != *a.global_batch_size) {
    base::fail(ds.source, ": train_batch_size is ", sizes.train_batch_size,
               " but --global-batch-size is ", *a.global_batch_size,
               a.was_given("--global-batch-size") ? "" : " (its default, b·D)");
  }
  a.deepspeed_batch = sizes;
  a.deepspeed_configuration = std::move(ds);
}

class Notes {
 public:
  explicit Notes(PretrainArgs& args) : args_(args) {}
  // One note naming those of `flags` that were given, followed by `why`.
  void given(std::initializer_list<const char*> flags, const std::string& why) {
    std::string names;
    for (const char* flag : flags) {
      if (args_.was_given(flag)) names += (names.empty() ? "" : ", ") + std::string(flag);
    }
    if (!names.empty()) args_.notes.push_back(names + ": " + why);
  }

 private:
  PretrainArgs& args_;
};

void collect_notes(PretrainArgs& a) {
  const DeepSpeedConfig& ds = *a.deepspeed_configuration;
  Notes notes(a);
  if (a.was_given("--clip-grad")) {
    a.notes.push_back(
        ds.gradient_clipping > 0
            ? base::cat("--clip-grad: not used in DeepSpeed mode; gradients are clipped at ",
                        ds.gradient_clipping, " (gradient_clipping of ", ds.source, ")")
            : base::cat("--clip-grad: not used in DeepSpeed mode, and ", ds.source,
                        " sets no gradient_clipping, so gradients are not clipped"));
  }
  for (const std::string& note : ds.notes) a.notes.push_back(ds.source + ": " + note);
  if (ds.prescale_gradients || ds.gradient_predivide_factor != 1.0) {
    a.notes.push_back(base::cat(
        ds.source,
        ": prescale_gradients / gradient_predivide_factor are not implemented: mds divides the "
        "data-parallel gradient sum by the data-parallel size after summing (DeepSpeed's "
        "default); dividing first, which keeps a 16-bit sum from overflowing, only changes "
        "rounding otherwise"));
  }
  notes.given({"--loss-scale", "--initial-loss-scale", "--min-loss-scale", "--loss-scale-window",
               "--hysteresis"},
              "not used in DeepSpeed mode; loss scaling comes from the fp16 block of " + ds.source);
  notes.given({"--zero-stage", "--zero-reduce-scatter", "--zero-contigious-gradients",
               "--zero-reduce-bucket-size", "--zero-allgather-bucket-size", "--remote-device",
               "--use-pin-memory"},
              base::cat("not used by the DeepSpeed engine; zero_optimization of ", ds.source,
                        " decides (stage ", ds.zero.stage, ")"));
  notes.given({"--DDP-impl", "--use-contiguous-buffers-in-ddp",
               "--no-scatter-gather-tensors-in-pipeline", "--accumulate-allreduce-grads-in-fp32",
               "--fp16-lm-cross-entropy", "--distribute-checkpointed-activations"},
              "only used by the Megatron-native path; no effect with --deepspeed");
  notes.given({"--codecarbon-dir", "--log-level", "--log-level-replica",
               "--abort-on-unmet-fused-kernel-constraints", "--num-workers", "--valid-num-workers",
               "--mmap-warmup", "--checkpoint-in-cpu", "--synchronize-each-layer",
               "--profile-backward", "--no-masked-softmax-fusion", "--no-bias-dropout-fusion"},
              "no effect in mds (upstream Python/PyTorch machinery; results do not depend on it)");
  notes.given({"--train-tokens", "--scattered-embeddings", "--split-transformers",
               "--memory-centric-tiled-linear", "--tile-factor"},
              "unused by GPT pretraining, as upstream");
  notes.given({"--reset-attention-mask"},
              "no effect in DeepSpeed mode: the pipeline model always uses the causal mask");
  if (a.tensor_model_parallel_size == 1) {
    notes.given({"--sync-tp-duplicated-parameters"}, "no effect with one tensor-parallel rank");
  } else {
    // Upstream averages them because its TP ranks drift apart (nondeterministic kernels); here
    // each rank computes the same gradients and updates for them (tests/e2e/
    // pretrain_tensor_parallel_test.sh compares the duplicates of every rank's files).
    notes.given({"--sync-tp-duplicated-parameters"},
                "no effect in mds: the parameters the tensor-parallel ranks duplicate stay "
                "bit-identical across them, so there is nothing to average");
  }
  if (a.pipeline_model_parallel_size == 1) {
    notes.given({"--pp-partition-method"}, "no effect with one pipeline stage");
  }
  if (a.optimizer == "adam") notes.given({"--sgd-momentum"}, "only used by --optimizer sgd");
  if (a.bias_gelu_fusion) {
    notes.given({"--openai-gelu"},
                "no effect without --no-bias-gelu-fusion (the fused tanh GeLU is used)");
  }
  if (a.apply_query_key_layer_scaling) {
    notes.given({"--attention-softmax-in-fp32"},
                "already implied by query-key layer scaling (on unless "
                "--no-query-key-layer-scaling)");
  }
}

// upstream reads --eval-only with type=bool, so any non-empty word, "False" included, means True.
// mds reads the word: true/false, yes/no, 1/0 (any case); anything else is an error.
void read_eval_only(PretrainArgs& a) {
  a.evaluate_only = false;
  if (!a.eval_only) return;
  std::string word;
  for (char c : *a.eval_only)
    word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (word == "true" || word == "yes" || word == "1") {
    a.evaluate_only = true;
  } else if (word != "false" && word != "no" && word != "0") {
    base::fail("--eval-only: expected True or False, got '", *a.eval_only, "'");
  }
}

}  // namespace

void validate_pretrain_args(PretrainArgs& a, const ProcessEnv& env) {
  a.notes.clear();
  read_eval_only(a);
  check_process_layout(a, env);
  check_data_modes(a);
  check_batch_and_precision(a);
  check_training_length(a);
  validate_model_shape(a);
  check_remaining_upstream_rules(a);
  refuse_unimplemented(a);
  check_deepspeed_config(a);
  collect_notes(a);
}

void validate_pretrain_args(PretrainArgs& args) {
  validate_pretrain_args(args, process_env_from_environment());
}

}  // namespace mds::config
