// Upstream's top-k / top-p filter on the examples of data.md §7.3, argmax ties, and seeded
// sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tasks/sampling.h"

namespace mds::tasks {
namespace {

std::vector<int> kept(const std::vector<float>& logits) {
  std::vector<int> ids;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (!std::isinf(logits[i])) ids.push_back(static_cast<int>(i));
  }
  return ids;
}

std::vector<int> filtered(std::vector<float> logits, std::int64_t k, double p) {
  filter_top_k_top_p(logits, k, p);
  return kept(logits);
}

TEST(SamplingTest, TopK) {
  EXPECT_EQ(filtered({1, 3, 2, 3, 0.5f}, 2, 0), (std::vector<int>{1, 3}));
  EXPECT_EQ(filtered({1, 3, 2, 3, 0.5f}, 3, 0), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(filtered({1, 3, 2, 3, 0.5f}, 1, 0), (std::vector<int>{1, 3}));  // ties survive
  EXPECT_EQ(filtered({1, 3, 2}, 10, 0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(filtered({1, 3, 2}, 0, 0), (std::vector<int>{0, 1, 2}));
}

TEST(SamplingTest, TopP) {
  EXPECT_EQ(filtered({2, 1, 0, -1}, 0, 0.5), (std::vector<int>{0}));
  EXPECT_EQ(filtered({2, 1, 0, -1}, 0, 0.9), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(filtered({-1, 0, 1, 2}, 0, 0.9), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(filtered({2, 1, 0, -1}, 0, 0.01), (std::vector<int>{0}));  // the first always stays
  EXPECT_EQ(filtered({2, 1, 0, -1}, 0, 1.0), (std::vector<int>{0, 1, 2, 3}));
}

TEST(SamplingTest, TopKThenTopP) {
  // After top-k = 2 the softmax sees only ids 0 and 1: p(0) = 0.731 > 0.7, so id 1 goes.
  EXPECT_EQ(filtered({2, 1, 0, -1}, 2, 0.7), (std::vector<int>{0}));
  EXPECT_EQ(filtered({2, 1, 0, -1}, 2, 0.8), (std::vector<int>{0, 1}));
}

TEST(SamplingTest, ArgmaxTakesTheFirstOfTies) {
  EXPECT_EQ(argmax(std::vector<float>{1, 5, 5, 2}), 1);
  std::vector<float> logits{1, 5, 5, 2};
  TokenSampler sampler(1, 0);
  SamplingOptions greedy;
  greedy.greedy = true;
  EXPECT_EQ(sampler.next(logits, greedy), 1);
}

TEST(SamplingTest, SeededAndRespectsTheFilter) {
  SamplingOptions options;
  options.top_k = 2;
  const std::vector<float> logits{0.1f, 2.0f, 1.9f, -3.0f, 0.0f};
  std::vector<std::int64_t> first, second;
  int counts[5] = {};
  for (int run = 0; run < 2; ++run) {
    TokenSampler sampler(42, 7);
    for (int i = 0; i < 400; ++i) {
      std::vector<float> scratch = logits;
      const std::int64_t id = sampler.next(scratch, options);
      (run == 0 ? first : second).push_back(id);
      if (run == 0) ++counts[id];
    }
  }
  EXPECT_EQ(first, second);
  EXPECT_EQ(counts[0] + counts[3] + counts[4], 0);
  EXPECT_GT(counts[1], 120);  // p = 0.525 and 0.475
  EXPECT_GT(counts[2], 120);
  TokenSampler other(42, 8);
  std::vector<std::int64_t> third;
  for (int i = 0; i < 400; ++i) {
    std::vector<float> scratch = logits;
    third.push_back(other.next(scratch, options));
  }
  EXPECT_NE(first, third);
}

TEST(SamplingTest, TemperatureSharpens) {
  SamplingOptions cold;
  cold.temperature = 0.01;
  TokenSampler sampler(3, 0);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> logits{0.0f, 1.0f, 0.5f};
    EXPECT_EQ(sampler.next(logits, cold), 1);
  }
}

}  // namespace
}  // namespace mds::tasks
