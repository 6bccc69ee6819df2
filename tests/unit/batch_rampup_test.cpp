#include "train/batch_rampup.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace mds::train {
namespace {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const base::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(BatchRampup, SpecVector) {
  const GlobalBatchSchedule s(1024, 1, 16, RampupBatchSize{16, 16, 5000000});
  EXPECT_EQ(s.samples_per_increment(), 79365.07936507936);
  EXPECT_EQ(s.global_batch_at(0), 16);
  EXPECT_EQ(s.global_batch_at(79365), 16);
  EXPECT_EQ(s.global_batch_at(79366), 32);
  EXPECT_EQ(s.global_batch_at(158730), 32);
  EXPECT_EQ(s.global_batch_at(158731), 48);
  EXPECT_EQ(s.global_batch_at(4999999), 1008);
  EXPECT_EQ(s.global_batch_at(5000000), 1024);
  EXPECT_EQ(s.global_batch_at(5000001), 1024);
  EXPECT_EQ(s.num_microbatches_at(79366), 2);
}

TEST(BatchRampup, TrainItersSpecVectors) {
  // tr1-13B: 16 16 5M, G 1024, 300M samples.
  EXPECT_EQ(train_iters_for_samples(
                GlobalBatchSchedule(1024, 1, 16, RampupBatchSize{16, 16, 5000000}), 300000000),
            311541);
  // tr11-176B: 192 16 9_765_625, G 2048, 220M samples.
  EXPECT_EQ(train_iters_for_samples(
                GlobalBatchSchedule(2048, 2, 48, RampupBatchSize{192, 16, 9765625}), 220000000),
            115311);
  // README toy: 2 2 1_000, G 16, 100 samples (ends inside the ramp-up: floor division of a
  // negative remainder, as upstream).
  EXPECT_EQ(
      train_iters_for_samples(GlobalBatchSchedule(16, 1, 2, RampupBatchSize{2, 2, 1000}), 100),
      129);
  // Without ramp-up: train_samples // G.
  EXPECT_EQ(train_iters_for_samples(GlobalBatchSchedule(16, 2, 4, std::nullopt), 1000), 62);
}

TEST(BatchRampup, ConstantBatch) {
  const GlobalBatchSchedule s(64, 2, 4, std::nullopt);
  EXPECT_FALSE(s.has_rampup());
  EXPECT_EQ(s.global_batch_at(0), 64);
  EXPECT_EQ(s.global_batch_at(123456789), 64);
  EXPECT_EQ(s.num_microbatches_at(0), 8);
}

TEST(BatchRampup, DivisibilityWithMicroBatchTimesDp) {
  // 16 16 5M with b·D = 32: 16 is not a multiple.
  const GlobalBatchSchedule s(1024, 2, 16, RampupBatchSize{16, 16, 5000000});
  EXPECT_EQ(error_of([&] { s.num_microbatches_at(0); }),
            "current global batch size (16) is not divisible by micro-batch-size (2) times data "
            "parallel size (16)");
  EXPECT_EQ(s.num_microbatches_at(0, false), 0);  // train_iters counting skips the check
  EXPECT_EQ(s.num_microbatches_at(79366), 1);
  EXPECT_EQ(error_of([] { GlobalBatchSchedule(100, 4, 8, std::nullopt); }),
            "global batch size (100) is not divisible by micro batch size (4) times data parallel "
            "size (8)");
}

TEST(BatchRampup, ConstructorChecks) {
  EXPECT_EQ(error_of([] {
              GlobalBatchSchedule(1024, 1, 1, RampupBatchSize{16, 10, 1000});
            }),
            "--rampup-batch-size: expected global batch size interval (1008) to be divisible by "
            "global batch size increment (10)");
  EXPECT_EQ(error_of([] {
              GlobalBatchSchedule(16, 1, 1, RampupBatchSize{16, 16, 1000});
            }),
            "--rampup-batch-size: start batch size (16) must be smaller than the global batch size "
            "(16)");
  EXPECT_EQ(error_of([] {
              GlobalBatchSchedule(16, 1, 1, RampupBatchSize{32, 16, 1000});
            }),
            "--rampup-batch-size: start batch size (32) must be smaller than the global batch size "
            "(16)");
  EXPECT_EQ(error_of([] {
              GlobalBatchSchedule(16, 1, 1, RampupBatchSize{0, 16, 1000});
            }),
            "--rampup-batch-size: start batch size must be > 0, got 0");
  EXPECT_EQ(error_of([] {
              GlobalBatchSchedule(16, 1, 1, RampupBatchSize{2, 0, 1000});
            }),
            "--rampup-batch-size: batch size increment must be > 0, got 0");
  EXPECT_EQ(error_of([] {
              GlobalBatchSchedule(16, 1, 1, RampupBatchSize{2, 2, 0});
            }),
            "--rampup-batch-size: ramp-up samples must be > 0, got 0");
  EXPECT_EQ(error_of([] { GlobalBatchSchedule(16, 0, 1, std::nullopt); }),
            "--micro-batch-size must be > 0, got 0");
  EXPECT_EQ(error_of([] { GlobalBatchSchedule(16, 1, 0, std::nullopt); }),
            "data-parallel size must be > 0, got 0");
  EXPECT_EQ(error_of([] { GlobalBatchSchedule(0, 1, 1, std::nullopt); }),
            "--global-batch-size must be > 0, got 0");
}

TEST(BatchRampup, ParseFlagWordsAsPythonInt) {
  const std::vector<std::string> words = {"16", " 16 ", "5_000_000"};
  const RampupBatchSize r = parse_rampup_batch_size(words);
  EXPECT_EQ(r.start, 16);
  EXPECT_EQ(r.increment, 16);
  EXPECT_EQ(r.samples, 5000000);
  EXPECT_EQ(parse_rampup_batch_size(std::vector<std::string>{"+2", "-2", "1_0"}).increment, -2);
  EXPECT_EQ(error_of([] {
              parse_rampup_batch_size(std::vector<std::string>{"16", "16"});
            }),
            "--rampup-batch-size: expected 3 values <start batch size> <batch size increment> "
            "<ramp-up samples>, got 2");
  for (const char* bad : {"5e6", "1__0", "_1", "1_", "", "0x10", "1.5", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(error_of([&] {
                parse_rampup_batch_size(std::vector<std::string>{"16", "16", bad});
              }),
              std::string("--rampup-batch-size: ramp-up samples '") + bad + "' is not an integer");
  }
}

TEST(BatchRampup, MonotoneAndReachesFinalBatch) {
  const GlobalBatchSchedule s(2048, 2, 48, RampupBatchSize{192, 16, 9765625});
  int64_t previous = 0;
  int64_t consumed = 0;
  while (consumed <= 9765625 + 4096) {
    const int64_t g = s.global_batch_at(consumed);
    EXPECT_GE(g, previous);
    EXPECT_LE(g, 2048);
    EXPECT_EQ((g - 192) % 16, 0);
    previous = g;
    consumed += g;
  }
  EXPECT_EQ(previous, 2048);
}

}  // namespace
}  // namespace mds::train
