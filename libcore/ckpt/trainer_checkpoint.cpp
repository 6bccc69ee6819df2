#include "ckpt/trainer_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/deepspeed_layout.h"
#include "ckpt/megatron_args.h"
#include "io/torch_file.h"

namespace mds::ckpt {

namespace {

std::string iteration_text(std::int64_t iteration) {
  char text[32];
  std::snprintf(text, sizeof text, "%7lld", static_cast<long long>(iteration));
  return text;
}

MegatronRunValues run_values(const train::Trainer& trainer, const RunDescription& run) {
  const train::TrainingProgress& progress = trainer.progress();
  MegatronRunValues values;
  values.padded_vocab_size = run.padded_vocab_size;
  values.iteration = progress.iteration;
  values.consumed_train_samples = progress.consumed_train_samples;
  values.consumed_valid_samples = progress.consumed_valid_samples;
  values.consumed_train_tokens = progress.consumed_train_tokens;
  values.gigaflos_no_embeds = progress.gigaflos_no_embeds;
  values.train_iters = trainer.options().train_iters;
  values.skip_train_iteration_range = trainer.remaining_skip_ranges();
  return values;
}

}  // namespace

OptimizerLayout optimizer_layout(const train::OptimizerOptions& options) {
  switch (options.precision) {
    case train::Precision::kFp32:
      return options.zero_stage >= 1 ? OptimizerLayout::kFp32Zero : OptimizerLayout::kFp32;
    case train::Precision::kBf16:
      return OptimizerLayout::kBf16;
    case train::Precision::kFp16:
      return options.zero_stage >= 1 ? OptimizerLayout::kFp16Zero1 : OptimizerLayout::kFp16;
  }
  return OptimizerLayout::kFp32;
}

TrainingState trainer_state(const train::Trainer& trainer, const RunDescription& run) {
  const train::MixedPrecisionOptimizer& optimizer = trainer.optimizer();
  const train::OptimizerOptions& options = optimizer.options();
  const train::TrainingProgress& progress = trainer.progress();
  TrainingState state;
  state.ranks = run.ranks;
  state.table = &trainer.table();
  state.layout = optimizer_layout(options);
  state.params = optimizer.params().flat();
  state.master = optimizer.master();
  state.exp_avg = optimizer.exp_avg();
  state.exp_avg_sq = optimizer.exp_avg_sq();
  if (optimizer.partitioned()) state.zero = &optimizer.shard().layout();
  state.zero_stage = std::max(options.zero_stage, 1);
  state.adam_step = optimizer.adam_step();
  state.adam.lr = trainer.lr_scheduler().lr();
  state.adam.beta1 = options.adam.beta1;
  state.adam.beta2 = options.adam.beta2;
  state.adam.eps = options.adam.eps;
  state.adam.weight_decay = options.adam.weight_decay;
  state.clip_grad = options.gradient_clipping;
  state.loss_scaler = optimizer.loss_scaler().state();
  state.lr_scheduler = trainer.lr_scheduler().state();
  state.iteration = progress.iteration;
  state.global_steps = progress.global_steps;
  state.global_samples = progress.consumed_train_samples;
  state.skipped_steps = progress.skipped_steps;
  state.consumed_train_samples = progress.consumed_train_samples;
  state.consumed_valid_samples = progress.consumed_valid_samples;
  state.consumed_train_tokens = progress.consumed_train_tokens;
  state.padded_vocab_size = run.padded_vocab_size;
  state.original_vocab_size = run.original_vocab_size;
  state.seed = static_cast<std::uint64_t>(trainer.options().seed);
  if (run.args != nullptr)
    state.args = megatron_args_namespace(*run.args, run_values(trainer, run));
  state.ds_config = run.ds_config;
  return state;
}

void TrainerCheckpointSaver::save(const train::Trainer& trainer) {
  const std::int64_t iteration = trainer.progress().iteration;
  log_->info("saving checkpoint at iteration " + iteration_text(iteration) + " to " + dir_);
  save_deepspeed_checkpoint(dir_, trainer_state(trainer, run_), options_, world_);
  log_->info("  successfully saved checkpoint at iteration " + iteration_text(iteration) + " to " +
             dir_);
}

void fill_missing_consumed_samples(const config::PretrainArgs& args, const std::string& checkpoint,
                                   train::TrainingProgress& progress) {
  const std::int64_t global_batch = args.global_batch_size.value_or(0);
  const auto iteration_based = [&](const char* counter) {
    if (args.train_samples) {
      base::fail("checkpoint ", checkpoint, ": ", counter, " is 0 at iteration ",
                 progress.iteration,
                 ", which upstream takes for a checkpoint saved before the counter existed and "
                 "recomputes; that needs iteration-based training (--train-iters), not "
                 "--train-samples");
    }
  };
  if (progress.iteration > 0 && progress.consumed_train_samples == 0) {
    iteration_based("consumed_train_samples");
    progress.consumed_train_samples = progress.iteration * global_batch;
  }
  const std::int64_t intervals = progress.iteration / args.eval_interval;
  if (intervals > 0 && progress.consumed_valid_samples == 0) {
    iteration_based("consumed_valid_samples");
    progress.consumed_valid_samples = intervals * args.eval_iters * global_batch;
  }
}

void restore_progress(const TrainingState& state, const LoadedCheckpoint& loaded,
                      const config::PretrainArgs& args, const std::string& checkpoint,
                      train::TrainingProgress& progress) {
  progress.iteration = state.iteration;
  progress.global_steps = state.global_steps;
  progress.skipped_steps = state.skipped_steps;
  progress.consumed_train_samples = state.consumed_train_samples;
  progress.consumed_valid_samples = state.consumed_valid_samples;
  progress.consumed_train_tokens = state.consumed_train_tokens;
  if (const std::optional<io::ValueRef> gigaflos =
          io::ValueRef(loaded.args, "args").object_state().get("gigaflos_no_embeds")) {
    progress.gigaflos_no_embeds = gigaflos->as_float();
  }
  fill_missing_consumed_samples(args, checkpoint, progress);
}

bool load_trainer_checkpoint(const std::string& dir, train::Trainer& trainer,
                             const RunDescription& run, const base::Log& log) {
  const std::optional<std::string> tag = read_latest_tag(dir);
  if (!tag) {
    // Upstream's behaviour; the hint is mds's (a converted checkpoint without
    // --universal-checkpoint would otherwise start a run from random weights with only this line to
    // say so).
    std::error_code error;
    const bool universal = std::filesystem::exists(dir + "/latest_universal", error);
    log.warn("could not find the metadata file " + dir +
             "/latest; no checkpoint is loaded and training starts from the initial weights" +
             (universal
                  ? " (" + dir + "/latest_universal exists: give --universal-checkpoint to load it)"
                  : std::string()));
    return false;
  }
  const config::PretrainArgs& args = *run.args;
  LoadOptions options;
  options.finetune = args.finetune;
  options.load_optimizer = !args.no_load_optim && !args.finetune;
  options.load_rng = !args.no_load_rng && !args.finetune;
  // The command line must describe the saved model before any tensor is compared with it.
  const std::string folder = dir + "/" + *tag;
  {
    const io::TorchFile model_states =
        io::TorchFile::open(folder + "/" + model_states_file_name(run.ranks.mp_rank()));
    check_checkpoint_args(model_states.root_ref()["args"], args, run.padded_vocab_size, folder);
  }
  // A load writes part of the state into the host views; the rest must be the current state.
  trainer.optimizer().copy_state_to_host();
  TrainingState state = trainer_state(trainer, run);
  log.info(" loading checkpoint from " + dir + " at tag " + *tag);
  const LoadedCheckpoint loaded = load_deepspeed_checkpoint(dir, *tag, state, options);
  for (const std::string& warning : loaded.warnings) log.warn(warning);
  // The last stage's replica of the word embedding is in no layer file (checkpoints.md §2.5).
  trainer.broadcast_tied_weights();

  train::MixedPrecisionOptimizer& optimizer = trainer.optimizer();
  if (options.load_optimizer) {
    optimizer.set_adam_step(state.adam_step);
    if (optimizer.options().precision == train::Precision::kFp16) {
      optimizer.load_loss_scaler_state(state.loss_scaler);
    }
    optimizer.restore_from_checkpoint(train::RestoreSource::kAsLoaded);
    trainer.lr_scheduler().load_state(state.lr_scheduler);
  } else {
    optimizer.restore_from_checkpoint(train::RestoreSource::kMasterFromParams);
  }
  if (!args.finetune) restore_progress(state, loaded, args, folder, trainer.progress());
  const train::TrainingProgress& progress = trainer.progress();
  log.info("  successfully loaded checkpoint from " + dir + " at iteration " +
           std::to_string(progress.iteration));
  return true;
}

}  // namespace mds::ckpt
