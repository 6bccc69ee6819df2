// fill_missing_consumed_samples: upstream's fallback for checkpoints saved before the
// consumed-sample counters (build_train_valid_test_data_iterators).
#include <gtest/gtest.h>

#include "base/error.h"
#include "ckpt/trainer_checkpoint.h"

namespace mds::ckpt {
namespace {

config::PretrainArgs iteration_based_args() {
  config::PretrainArgs args;
  args.train_iters = 100;
  args.global_batch_size = 8;
  args.eval_interval = 10;
  args.eval_iters = 3;
  return args;
}

TEST(OldCheckpointCounters, MissingCountersFollowTheIteration) {
  train::TrainingProgress progress;
  progress.iteration = 25;
  fill_missing_consumed_samples(iteration_based_args(), "ckpt/global_step25", progress);
  EXPECT_EQ(progress.consumed_train_samples, 25 * 8);
  EXPECT_EQ(progress.consumed_valid_samples, 2 * 3 * 8);  // two evaluation intervals passed
}

TEST(OldCheckpointCounters, SavedCountersAndEarlyCheckpointsAreLeftAlone) {
  train::TrainingProgress progress;
  progress.iteration = 25;
  progress.consumed_train_samples = 123;
  progress.consumed_valid_samples = 45;
  fill_missing_consumed_samples(iteration_based_args(), "ckpt/global_step25", progress);
  EXPECT_EQ(progress.consumed_train_samples, 123);
  EXPECT_EQ(progress.consumed_valid_samples, 45);

  train::TrainingProgress before_any_evaluation;
  before_any_evaluation.iteration = 9;
  fill_missing_consumed_samples(iteration_based_args(), "ckpt/global_step9", before_any_evaluation);
  EXPECT_EQ(before_any_evaluation.consumed_train_samples, 9 * 8);
  EXPECT_EQ(before_any_evaluation.consumed_valid_samples, 0);

  train::TrainingProgress fresh;
  fill_missing_consumed_samples(iteration_based_args(), "ckpt/global_step0", fresh);
  EXPECT_EQ(fresh.consumed_train_samples, 0);
}

TEST(OldCheckpointCounters, SampleBasedTrainingCannotGuessThem) {
  config::PretrainArgs args = iteration_based_args();
  args.train_iters.reset();
  args.train_samples = 800;
  train::TrainingProgress progress;
  progress.iteration = 25;
  try {
    fill_missing_consumed_samples(args, "ckpt/global_step25", progress);
    FAIL() << "expected an error";
  } catch (const base::Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("checkpoint ckpt/global_step25: consumed_train_samples is 0 at "
                        "iteration 25"),
              std::string::npos)
        << error.what();
  }
  // Counters present: nothing to guess, sample-based training resumes.
  progress.consumed_train_samples = 200;
  progress.consumed_valid_samples = 48;
  EXPECT_NO_THROW(fill_missing_consumed_samples(args, "ckpt/global_step25", progress));
}

}  // namespace
}  // namespace mds::ckpt
