// Blending weights, per-dataset sample targets and blending indices against data.md §5.5 and §8.5
// (verified upstream), numpy's pairwise sum against numpy 1.24, and the sample targets of §5.2.
#include "data/blending.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/gpt_dataset.h"

namespace mds::data {
namespace {

struct Expected {
  std::vector<std::uint8_t> dataset_index;
  std::vector<std::int64_t> sample_index;
};

void expect_indices(const std::vector<double>& weights, std::size_t size,
                    const Expected& expected) {
  const BlendingIndices indices = build_blending_indices(weights, size);
  EXPECT_EQ(indices.dataset_index, expected.dataset_index);
  EXPECT_EQ(indices.dataset_sample_index, expected.sample_index);
}

TEST(BlendingIndices, UpstreamExamples) {
  expect_indices({0.3, 0.7}, 10, {{1, 0, 1, 1, 0, 1, 1, 0, 1, 1}, {0, 0, 1, 2, 1, 3, 4, 2, 5, 6}});
  expect_indices({0.5, 0.25, 0.25}, 8, {{0, 1, 2, 0, 0, 1, 2, 0}, {0, 0, 0, 1, 2, 1, 1, 3}});
  const double third = 1.0 / 3.0;
  expect_indices({third, third, third}, 7, {{0, 1, 2, 0, 1, 2, 0}, {0, 0, 0, 1, 1, 1, 2}});
  expect_indices({0.9, 0.1}, 12,
                 {{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1}});
}

TEST(BlendingIndices, RefusesTooManyDatasets) {
  EXPECT_THROW(build_blending_indices(std::vector<double>(255, 1.0 / 255), 3), base::Error);
  EXPECT_NO_THROW(build_blending_indices(std::vector<double>(254, 1.0 / 254), 3));
  EXPECT_THROW(build_blending_indices(std::vector<double>{}, 3), base::Error);
}

TEST(BlendWeights, SampleTargetsWithTheHalfPercentMargin) {
  const auto counts = blended_sample_counts(normalize_weights(std::vector<double>{0.3, 0.7}),
                                            SplitCounts{1000, 200, 10});
  EXPECT_EQ(counts, (std::vector<SplitCounts>{{302, 61, 4}, {704, 141, 8}}));
  const std::vector<std::string> data_path = {"1", "A", "2", " B"};
  const WeightedPrefixes parsed = parse_weighted_prefixes(data_path);
  EXPECT_EQ(parsed.prefixes, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(blended_sample_counts(normalize_weights(parsed.weights), SplitCounts{100, 30, 3}),
            (std::vector<SplitCounts>{{34, 11, 2}, {67, 21, 3}}));
}

TEST(BlendWeights, DataPathForms) {
  const std::vector<std::string> single = {"/data/x"};
  EXPECT_EQ(parse_weighted_prefixes(single).weights, std::vector<double>{1.0});
  const std::vector<std::string> odd = {"1", "A", "2"};
  EXPECT_THROW(parse_weighted_prefixes(odd), base::Error);
  const std::vector<std::string> bad = {"x", "A", "2", "B"};
  EXPECT_THROW(parse_weighted_prefixes(bad), base::Error);
  EXPECT_THROW(normalize_weights(std::vector<double>{0.0, 0.0}), base::Error);
}

// float(np.sum(a)) for a[i] = (0.1 i + 1/(i+1)) × (−1)^(i mod 3), numpy 1.24; n = 8, 129 and 300
// differ from a sequential sum.
TEST(BlendWeights, NumpyPairwiseSumMatchesNumpy) {
  const struct {
    std::size_t n;
    double sum;
  } cases[] = {
      {5, 0x1.c444444444444p-1},   {8, 0x1.77c57c57c57c5p+0},    {13, 0x1.2fe467009e959p+2},
      {129, 0x1.15408415ae5c8p+8}, {300, 0x1.7655498e6e212p+10},
  };
  for (const auto& c : cases) {
    std::vector<double> values;
    for (std::size_t i = 0; i < c.n; ++i) {
      const double sign = (i % 3) % 2 == 0 ? 1.0 : -1.0;
      values.push_back((static_cast<double>(i) * 0.1 + 1.0 / static_cast<double>(i + 1)) * sign);
    }
    EXPECT_EQ(numpy_pairwise_sum(values), c.sum) << "n = " << c.n;
  }
  EXPECT_TRUE(std::signbit(numpy_pairwise_sum(std::vector<double>{-0.0, -0.0})));
  const auto normalized = numpy_normalize_weights(std::vector<double>{1, 3});
  EXPECT_EQ(normalized, (std::vector<double>{0.25, 0.75}));
}

TEST(BlendSampleTargets, FromIterationsOrSamples) {
  SampleCountArgs args;
  args.train_iters = 1000;
  args.global_batch_size = 8;
  args.eval_interval = 100;
  args.eval_iters = 10;
  EXPECT_EQ(train_valid_test_num_samples(args), (SplitCounts{8000, 880, 80}));
  args.train_samples = 8003;  // train_iters = 8003 // 8 = 1000
  EXPECT_EQ(train_valid_test_num_samples(args), (SplitCounts{8003, 880, 80}));
  args.global_batch_size = 0;
  EXPECT_THROW(train_valid_test_num_samples(args), base::Error);
}

// With --rampup-batch-size the validation target follows the ramp-up's iteration count, not
// train_samples // global_batch_size: upstream computes it from args.train_iters, which
// update_train_iters has counted through the ramp-up (here 32 iterations for 96 samples instead
// of 96 // 4 = 24).
TEST(BlendSampleTargets, ValidationFollowsTheRampUpIterations) {
  SampleCountArgs args;
  args.train_samples = 96;
  args.train_iters = 32;
  args.global_batch_size = 4;
  args.eval_interval = 10;
  args.eval_iters = 2;
  EXPECT_EQ(train_valid_test_num_samples(args), (SplitCounts{96, 32, 8}));
  // A --train-samples that ends inside the ramp-up gives negative iterations (upstream kept);
  // Python floors -3 // 10 to -1, so no validation samples.
  args.train_iters = -3;
  EXPECT_EQ(train_valid_test_num_samples(args), (SplitCounts{96, 0, 8}));
  args.train_iters = -10;
  EXPECT_EQ(train_valid_test_num_samples(args), (SplitCounts{96, 0, 8}));
  args.train_iters = -11;
  EXPECT_EQ(train_valid_test_num_samples(args), (SplitCounts{96, -8, 8}));
}

}  // namespace
}  // namespace mds::data
