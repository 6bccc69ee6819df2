#include "train/batch_rampup.h"

#include "base/error.h"
#include "base/python_int.h"

namespace mds::train {
namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

RampupBatchSize parse_rampup_batch_size(std::span<const std::string> words) {
  if (words.size() != 3)
    base::fail("--rampup-batch-size: expected 3 values <start batch size> <batch size increment> ",
               "<ramp-up samples>, got ", words.size());
  int64_t values[3];
  const char* names[3] = {"start batch size", "batch size increment", "ramp-up samples"};
  for (size_t k = 0; k < 3; ++k) {
    const auto value = base::python_int(words[k]);
    if (!value)
      base::fail("--rampup-batch-size: ", names[k], " '", words[k], "' is not an integer");
    values[k] = *value;
  }
  return RampupBatchSize{values[0], values[1], values[2]};
}

GlobalBatchSchedule::GlobalBatchSchedule(int64_t global_batch_size, int64_t micro_batch_size,
                                         int64_t data_parallel_size,
                                         std::optional<RampupBatchSize> rampup)
    : global_batch_size_(global_batch_size),
      micro_batch_size_(micro_batch_size),
      data_parallel_size_(data_parallel_size),
      micro_times_dp_(micro_batch_size * data_parallel_size),
      rampup_(rampup) {
  if (micro_batch_size <= 0) base::fail("--micro-batch-size must be > 0, got ", micro_batch_size);
  if (data_parallel_size <= 0)
    base::fail("data-parallel size must be > 0, got ", data_parallel_size);
  if (global_batch_size <= 0)
    base::fail("--global-batch-size must be > 0, got ", global_batch_size);
  if (!rampup_) {
    if (global_batch_size % micro_times_dp_ != 0)
      base::fail("global batch size (", global_batch_size,
                 ") is not divisible by micro batch size (", micro_batch_size,
                 ") times data parallel size (", data_parallel_size, ")");
    return;
  }
  const RampupBatchSize& r = *rampup_;
  if (r.start <= 0) base::fail("--rampup-batch-size: start batch size must be > 0, got ", r.start);
  if (r.increment <= 0)
    base::fail("--rampup-batch-size: batch size increment must be > 0, got ", r.increment);
  if (r.samples <= 0)
    base::fail("--rampup-batch-size: ramp-up samples must be > 0, got ", r.samples);
  const int64_t diff = global_batch_size - r.start;
  if (diff <= 0)
    base::fail("--rampup-batch-size: start batch size (", r.start,
               ") must be smaller than the global batch size (", global_batch_size, ")");
  if (diff % r.increment != 0)
    base::fail("--rampup-batch-size: expected global batch size interval (", diff,
               ") to be divisible by global batch size increment (", r.increment, ")");
  const int64_t num_increments = diff / r.increment;
  samples_per_increment_ = static_cast<double>(r.samples) / static_cast<double>(num_increments);
}

int64_t GlobalBatchSchedule::global_batch_at(int64_t consumed_samples) const {
  if (!rampup_ || consumed_samples > rampup_->samples) return global_batch_size_;
  // int(c / per_increment) on doubles, as upstream.
  const auto steps =
      static_cast<int64_t>(static_cast<double>(consumed_samples) / samples_per_increment_);
  return rampup_->start + steps * rampup_->increment;
}

int64_t GlobalBatchSchedule::num_microbatches_at(int64_t consumed_samples,
                                                 bool consistency_check) const {
  const int64_t current = global_batch_at(consumed_samples);
  if (consistency_check && current % micro_times_dp_ != 0)
    base::fail("current global batch size (", current, ") is not divisible by micro-batch-size (",
               micro_batch_size_, ") times data parallel size (", data_parallel_size_, ")");
  return current / micro_times_dp_;
}

int64_t train_iters_for_samples(const GlobalBatchSchedule& schedule, int64_t train_samples) {
  const int64_t g = schedule.global_batch_size();
  if (!schedule.has_rampup()) return floor_div(train_samples, g);
  // Walk the ramp-up one iteration at a time; the partial last batch is dropped.
  int64_t iterations = 0;
  int64_t consumed = 0;
  while (consumed <= schedule.rampup()->samples) {
    consumed += schedule.global_batch_at(consumed);
    iterations += 1;
  }
  return iterations + floor_div(train_samples - consumed, g);
}

}  // namespace mds::train
