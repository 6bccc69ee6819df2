// Global batch size as a function of consumed samples (megatron/microbatches.py), and the number of
// training iterations that --train-samples implies through a ramp-up (training.update_train_iters).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace mds::train {

// --rampup-batch-size <start> <increment> <samples>.
struct RampupBatchSize {
  int64_t start = 0;
  int64_t increment = 0;
  int64_t samples = 0;
};

// The three words of --rampup-batch-size, each read as Python's int() does (surrounding spaces,
// a sign and underscores between digits allowed, so "5_000_000" works as upstream).
RampupBatchSize parse_rampup_batch_size(std::span<const std::string> words);

class GlobalBatchSchedule {
 public:
  // Checks as upstream's calculators: without ramp-up G must be divisible by b·D; with it,
  // (G − start) must be a multiple of the increment (and positive: start == G would divide by
  // zero upstream), start, increment and samples positive.
  GlobalBatchSchedule(int64_t global_batch_size, int64_t micro_batch_size,
                      int64_t data_parallel_size, std::optional<RampupBatchSize> rampup);

  // G_cur for a consumed-sample count: start + floor(c / per_increment)·increment during the
  // ramp-up, G once c exceeds the ramp-up samples.
  int64_t global_batch_at(int64_t consumed_samples) const;
  // G_cur / (b·D); with `consistency_check` an Error when G_cur is not a multiple of b·D.
  int64_t num_microbatches_at(int64_t consumed_samples, bool consistency_check = true) const;

  bool has_rampup() const { return rampup_.has_value(); }
  const std::optional<RampupBatchSize>& rampup() const { return rampup_; }
  int64_t global_batch_size() const { return global_batch_size_; }
  int64_t micro_batch_times_data_parallel() const { return micro_times_dp_; }
  // Samples per increment (a float upstream); 0 without ramp-up.
  double samples_per_increment() const { return samples_per_increment_; }

 private:
  int64_t global_batch_size_;
  int64_t micro_batch_size_;
  int64_t data_parallel_size_;
  int64_t micro_times_dp_;
  std::optional<RampupBatchSize> rampup_;
  double samples_per_increment_ = 0.0;
};

// train_iters for --train-samples: train_samples // G without ramp-up; with it, the iterations
// needed to pass the ramp-up samples plus (train_samples − consumed) // G, floor division, which
// can be negative when train_samples ends inside the ramp-up (upstream behaviour, kept).
int64_t train_iters_for_samples(const GlobalBatchSchedule& schedule, int64_t train_samples);

}  // namespace mds::train
