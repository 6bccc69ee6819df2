// Training, learning-rate, checkpointing, validation, data and logging flags of `pretrain`.
#include "config/pretrain_flags.h"

namespace mds::config::pretrain_flags {
namespace {

void add_training(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Training");
  g.integer("--micro-batch-size", a.micro_batch_size, "samples per micro-batch per rank (b)")
      ->required();
  g.integer("--global-batch-size", a.global_batch_size,
            "samples per optimizer step (G); default b·D");
  g.words("--rampup-batch-size", a.rampup_batch_size, 0,
          "START INCREMENT SAMPLES: grow G from START by INCREMENT over SAMPLES samples");
  g.store_true("--checkpoint-activations", a.checkpoint_activations,
               "recompute transformer layers in the backward pass");
  g.store_true("--distribute-checkpointed-activations", a.distribute_checkpointed_activations,
               "Megatron-native path only (needs --checkpoint-activations)");
  g.integer("--checkpoint-num-layers", a.checkpoint_num_layers,
            "layers per recomputed chunk with --checkpoint-activations");
  g.integer("--train-iters", a.train_iters, "iterations to train (or --train-samples)");
  g.integer("--train-samples", a.train_samples, "samples to train (or --train-iters)");
  g.integer("--train-tokens", a.train_tokens, "accepted but unused, as upstream");
  g.integer("--log-interval", a.log_interval, "iterations between log lines");
  g.integer("--exit-interval", a.exit_interval,
            "save and exit when the iteration is a multiple of this");
  g.integer("--exit-duration-in-mins", a.exit_duration_in_mins,
            "save and exit after this many minutes");
  g.text("--tensorboard-dir", a.tensorboard_dir, "write TensorBoard events to this folder");
  g.store_false("--no-masked-softmax-fusion", a.masked_softmax_fusion,
                "upstream kernel choice; same results");
  g.store_false("--no-bias-gelu-fusion", a.bias_gelu_fusion,
                "use the exact erf GeLU (or --openai-gelu) instead of the fused tanh form");
  g.store_false("--no-bias-dropout-fusion", a.bias_dropout_fusion,
                "upstream kernel choice; same results");
  g.choice("--optimizer", a.optimizer, {"adam", "sgd"}, "adam (AdamW); sgd is not implemented");
  g.choice("--dataloader-type", a.dataloader_type, {"single", "cyclic"},
           "sample order; mds implements single");
  g.text("--codecarbon-dir", a.codecarbon_dir, "upstream's energy log folder (no effect in mds)");
  g.store_true("--abort-on-unmet-fused-kernel-constraints",
               a.abort_on_unmet_fused_kernel_constraints, "no effect in mds");
  g.text("--pp-partition-method", a.pp_partition_method,
         "pipeline partitioning, e.g. 'type:transformer|embedding'");
  g.refuse("--batch-size", "--batch-size is no longer valid, use --micro-batch-size instead", true);
  g.refuse("--use-bnb-optimizer", "8-bit Adam (bitsandbytes) is not implemented", false);
  g.refuse("--cpu-optimizer", "an optimizer on the CPU is not implemented", false);
  g.refuse("--cpu_torch_adam", "an optimizer on the CPU is not implemented", false);
  g.text("--eval-only", a.eval_only,
         "True: no training step, only the validation and test evaluation at the end");
  g.words("--skip-train-iteration-range", a.skip_train_iteration_range, 1,
          "START-END ...: pass over the data of these iterations without training");
  g.refuse("--inference", "the trainer's inference mode is not implemented", false);
}

void add_learning_rate(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Learning rate");
  g.real("--lr", a.lr, "peak learning rate (required for training)");
  g.choice("--lr-decay-style", a.lr_decay_style, {"constant", "linear", "cosine"},
           "decay after warmup");
  g.integer("--lr-decay-iters", a.lr_decay_iters, "decay over this many iterations");
  g.integer("--lr-decay-samples", a.lr_decay_samples, "decay over this many samples");
  g.integer("--lr-decay-tokens", a.lr_decay_tokens, "decay over this many tokens");
  g.real("--lr-warmup-fraction", a.lr_warmup_fraction, "warmup as a fraction of the decay");
  g.integer("--lr-warmup-iters", a.lr_warmup_iters, "warmup iterations");
  g.integer("--lr-warmup-samples", a.lr_warmup_samples, "warmup samples");
  g.real("--min-lr", a.min_lr, "learning rate floor");
  g.store_true("--override-lr-scheduler", a.override_lr_scheduler,
               "on load, the command line wins over the checkpoint's schedule");
  g.store_true("--use-checkpoint-lr-scheduler", a.use_checkpoint_lr_scheduler,
               "on load, the checkpoint's schedule wins");
  g.store_true("--universal-checkpoint", a.universal_checkpoint,
               "--load names a universal checkpoint");
  g.refuse("--warmup", "--warmup is no longer valid, use --lr-warmup-fraction instead", true);
}

void add_checkpointing(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Checkpointing");
  g.text("--save", a.save, "folder to save checkpoints to");
  g.integer("--save-interval", a.save_interval, "iterations between saves (required with --save)");
  g.store_true("--no-save-optim", a.no_save_optim, "do not save the optimizer state");
  g.store_true("--no-save-rng", a.no_save_rng, "do not save the RNG states");
  g.text("--load", a.load, "folder to load a checkpoint from");
  g.store_true("--no-load-optim", a.no_load_optim, "do not load the optimizer state");
  g.store_true("--no-load-rng", a.no_load_rng, "do not load the RNG states");
  g.store_true("--finetune", a.finetune,
               "load weights only and start at iteration 0 (no optimizer or RNG state)");
}

void add_validation(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Validation");
  g.integer("--eval-iters", a.eval_iters, "batches per evaluation");
  g.integer("--eval-interval", a.eval_interval, "iterations between evaluations");
}

void add_data(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Data");
  g.words("--data-path", a.data_path, 0, "PREFIX, or W1 PREFIX1 W2 PREFIX2 ... to blend datasets");
  g.text("--split", a.split, "train, valid, test proportions; default '969, 30, 1'");
  g.words("--train-weighted-split-paths", a.train_weighted_split_paths, 0,
          "'NAME: W1 START:END PREFIX1, ...' (instead of --data-path and --split)");
  g.words("--valid-weighted-split-paths", a.valid_weighted_split_paths, 0,
          "validation groups, one string each");
  g.words("--test-weighted-split-paths", a.test_weighted_split_paths, 0,
          "test groups, one string each");
  g.text("--train-weighted-split-paths-path", a.train_weighted_split_paths_path,
         "a file holding the --train-weighted-split-paths strings");
  g.text("--valid-weighted-split-paths-path", a.valid_weighted_split_paths_path,
         "a file holding the --valid-weighted-split-paths strings");
  g.text("--test-weighted-split-paths-path", a.test_weighted_split_paths_path,
         "a file holding the --test-weighted-split-paths strings");
  g.text("--log-path", a.log_path, "folder for an args_<time>.txt copy of the arguments");
  g.integer("--seq-length", a.seq_length, "tokens per sample (s)");
  g.integer("--encoder-seq-length", a.encoder_seq_length, "alias of --seq-length");
  g.store_true("--mmap-warmup", a.mmap_warmup, "read the datasets once at start-up");
  g.integer("--num-workers", a.num_workers, "upstream's loader processes (no effect in mds)");
  g.integer("--valid-num-workers", a.valid_num_workers,
            "upstream's loader processes (no effect in mds)");
  g.choice("--data-impl", a.data_impl, {"lazy", "cached", "mmap", "infer"},
           "dataset index format; infer reads it from the .idx");
  g.store_true("--reset-position-ids", a.reset_position_ids,
               "restart position ids after each end-of-document token");
  g.store_true("--reset-attention-mask", a.reset_attention_mask,
               "no effect in DeepSpeed mode (the pipeline model uses a causal mask)");
  g.store_true("--eod-mask-loss", a.eod_mask_loss, "no loss on predictions made from EOD");
  add_tokenizer_flags(flags, a.tokenizer, "GPT2BPETokenizer", VocabExtraIdsFlag::kPresent);
  const std::string not_gpt = "only used by BERT/T5/biencoder models, not by GPT pretraining";
  for (const char* name :
       {"--decoder-seq-length", "--retriever-seq-length", "--sample-rate", "--mask-prob",
        "--short-seq-prob", "--noise-density", "--mean-noise-span-length"}) {
    g.refuse(name, not_gpt, true);
  }
  g.refuse("--loss-on-targets-only", "prefix-LM loss masking is not implemented", false);
  g.refuse("--reweight-loss-based-on-position-frequency",
           "prefix-LM loss masking is not implemented", false);
}

void add_logging(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Logging");
  g.store_true("--log-params-norm", a.log_params_norm, "log the norm of the parameters");
  g.store_true("--log-num-zeros-in-grad", a.log_num_zeros_in_grad,
               "log the number of zero gradients");
  const std::string tb = " (TensorBoard)";
  g.integer("--tensorboard-log-interval", a.tensorboard_log_interval, "write interval" + tb);
  g.integer("--tensorboard-queue-size", a.tensorboard_queue_size, "event queue size" + tb);
  g.store_true("--log-timers-to-tensorboard", a.log_timers_to_tensorboard, "timers" + tb);
  g.store_true("--log-batch-size-to-tensorboard", a.log_batch_size_to_tensorboard,
               "batch size" + tb);
  g.store_false("--no-log-learnig-rate-to-tensorboard", a.log_learning_rate_to_tensorboard,
                "(sic) learning rate" + tb);
  g.store_false("--no-log-loss-scale-to-tensorboard", a.log_loss_scale_to_tensorboard,
                "loss scale" + tb);
  g.store_true("--log-validation-ppl-to-tensorboard", a.log_validation_ppl_to_tensorboard,
               "validation perplexity" + tb);
}

}  // namespace

void add_training_flags(FlagSet& flags, PretrainArgs& args) {
  add_training(flags, args);
  add_learning_rate(flags, args);
  add_checkpointing(flags, args);
  add_validation(flags, args);
  add_data(flags, args);
  add_logging(flags, args);
}

}  // namespace mds::config::pretrain_flags
