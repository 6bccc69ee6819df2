// Saving and resuming a Trainer through the DeepSpeed checkpoint layout: the mapping between the
// trainer's buffers and counters and a ckpt::TrainingState, and upstream's log lines around it.
#pragma once
#include <string>

#include "base/log.h"
#include "ckpt/training_state.h"
#include "config/pretrain_args.h"
#include "train/trainer.h"

namespace mds::ckpt {

// What a checkpoint records about the run beyond the trainer itself.
struct RunDescription {
  const config::PretrainArgs* args = nullptr;
  std::int64_t padded_vocab_size = 0;
  std::int64_t original_vocab_size = 0;
  io::Value ds_config;    // the DeepSpeed JSON as a dict
  CheckpointRanks ranks;  // this rank's place in the grid (names its files)
};

// The layout DeepSpeed's wrapper for this precision and ZeRO stage writes.
OptimizerLayout optimizer_layout(const train::OptimizerOptions& options);

// Views of the trainer's buffers and its counters, with the Megatron args namespace.
TrainingState trainer_state(const train::Trainer& trainer, const RunDescription& run);

// Writes a checkpoint into --save at each save point of the training loop.
class TrainerCheckpointSaver : public train::CheckpointSaver {
 public:
  // With a world of several ranks, every rank has a saver and saves together (each its files).
  TrainerCheckpointSaver(std::string dir, RunDescription run, SaveOptions options,
                         const base::Log& log, dist::Communicator* world = nullptr)
      : dir_(std::move(dir)), run_(std::move(run)), options_(options), log_(&log), world_(world) {}
  void save(const train::Trainer& trainer) override;

 private:
  std::string dir_;
  RunDescription run_;
  SaveOptions options_;
  const base::Log* log_;
  dist::Communicator* world_;
};

// The counters a loaded checkpoint carries (iteration, steps, consumed samples and tokens, and
// gigaflos_no_embeds from its args), into the trainer's progress, with the fallback below.
void restore_progress(const TrainingState& state, const LoadedCheckpoint& loaded,
                      const config::PretrainArgs& args, const std::string& checkpoint,
                      train::TrainingProgress& progress);

// Upstream's backward compatibility for checkpoints saved before the consumed-sample counters
// existed (build_train_valid_test_data_iterators): at iteration > 0 a consumed_train_samples of 0
// becomes iteration × --global-batch-size, and a consumed_valid_samples of 0 after at least one
// evaluation interval (iteration // eval_interval) × eval_iters × --global-batch-size. As upstream,
// only iteration-based runs can do this: with --train-samples such a checkpoint fails naming
// `checkpoint`.
void fill_missing_consumed_samples(const config::PretrainArgs& args, const std::string& checkpoint,
                                   train::TrainingProgress& progress);

// --load: restores the checkpoint named by <dir>/latest into the trainer (weights, optimizer,
// scheduler, loss scaler and counters as the flags allow). Without a `latest` file it says so and
// returns false, as DeepSpeed does: training starts from the initial weights.
bool load_trainer_checkpoint(const std::string& dir, train::Trainer& trainer,
                             const RunDescription& run, const base::Log& log);

}  // namespace mds::ckpt
