// ops::LaunchVariantChoices (the launch shapes kernels pick by timing, DeviceContext::
// time_kernel_shapes): the pick is the fastest variant with variant 0's bits, kept per problem.
// The timing itself (kernels/variant_trials.h) needs a device: tests/gpu/kernel_shapes_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "ops/launch_variants.h"
#include "test_support.h"

namespace mds::ops {
namespace {

using testing_support::one_line_error;

TEST(LaunchVariants, PicksTheFastestWithTheDefaultsBits) {
  EXPECT_EQ(fastest_same_bits({{1.0f, true}}), 0);
  EXPECT_EQ(fastest_same_bits({{1.0f, true}, {0.5f, true}, {0.7f, true}}), 1);
  // Faster but with other bits: never picked.
  EXPECT_EQ(fastest_same_bits({{1.0f, true}, {0.5f, false}, {0.7f, true}}), 2);
  EXPECT_EQ(fastest_same_bits({{1.0f, true}, {0.5f, false}}), 0);
  // Variant 0 is the reference, whatever its own flag says.
  EXPECT_EQ(fastest_same_bits({{0.4f, false}, {0.5f, true}}), 0);
  // Ties go to the lower index; slower variants are not picked.
  EXPECT_EQ(fastest_same_bits({{1.0f, true}, {1.0f, true}}), 0);
  EXPECT_EQ(fastest_same_bits({{1.0f, true}, {0.8f, true}, {0.8f, true}}), 1);
  EXPECT_EQ(fastest_same_bits({{1.0f, true}, {1.5f, true}}), 0);
  EXPECT_THROW(fastest_same_bits({}), base::Error);
}

// The trials' procedure with the device's parts played by the host: each variant runs once and
// has its outputs compared, then the rounds time the variants in turn, keeping each one's fastest.
TEST(LaunchVariants, TrialsCompareOutputsThenTimeEachVariantInTurn) {
  std::vector<std::string> events;
  int last_run = -1;
  // Variant 2 leaves other bytes; times: variant v in round r takes 10 − v + (r == 1 ? −5 : 0).
  int round = 0, timed = 0;
  const std::vector<VariantTrial> trials = run_trials(
      3, 2,
      [&](int v) {
        events.push_back("run " + std::to_string(v));
        last_run = v;
      },
      [&] {
        events.push_back("read");
        return std::vector<std::string>{"same", last_run == 2 ? "other" : "same"};
      },
      [&](int v) {
        events.push_back("time " + std::to_string(v));
        const float ms = static_cast<float>(10 - v + (round == 1 ? -5 : 0));
        if (++timed % 3 == 0) ++round;
        return ms;
      });
  EXPECT_EQ(events,
            (std::vector<std::string>{"run 0", "read", "run 1", "read", "run 2", "read", "time 0",
                                      "time 1", "time 2", "time 0", "time 1", "time 2"}));
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_TRUE(trials[0].same_bits);
  EXPECT_TRUE(trials[1].same_bits);
  EXPECT_FALSE(trials[2].same_bits);
  EXPECT_EQ(trials[0].ms, 5.0f);  // the fastest round's
  EXPECT_EQ(trials[1].ms, 4.0f);
  EXPECT_EQ(trials[2].ms, 3.0f);
  EXPECT_EQ(fastest_same_bits(trials), 1);  // variant 2 is faster but not the default's bits
  EXPECT_EQ(one_line_error([] { run_trials(0, 1, {}, {}, {}); }),
            "run_trials: 0 variants, 1 rounds");
}

TEST(LaunchVariants, KeepsOnePickAProblem) {
  LaunchVariantChoices choices;
  EXPECT_FALSE(choices.find("attention_forward bf16 s=1024").has_value());
  EXPECT_EQ(choices.record("attention_forward bf16 s=1024", {"blocks of 64 rows", "two atoms"},
                           {{0.09f, true}, {0.07f, true}}),
            1);
  EXPECT_EQ(choices.find("attention_forward bf16 s=1024"), 1);
  EXPECT_FALSE(choices.find("attention_forward bf16 s=512").has_value());
  choices.record_default("cross_entropy bf16", "no device memory for the trials");
  EXPECT_EQ(choices.find("cross_entropy bf16"), 0);
  ASSERT_EQ(choices.picks().size(), 2u);
  EXPECT_EQ(choices.picks()[0].chosen, 1);
  EXPECT_TRUE(choices.picks()[1].trials.empty());
  EXPECT_EQ(choices.picks()[1].untimed_reason, "no device memory for the trials");
}

TEST(LaunchVariants, RefusesASecondPickOrMismatchedCounts) {
  LaunchVariantChoices choices;
  choices.record("k", {"a", "b"}, {{1.0f, true}, {2.0f, true}});
  EXPECT_EQ(one_line_error([&] {
              choices.record("k", {"a"}, {{1.0f, true}});
            }),
            "launch variants: k was picked before");
  EXPECT_EQ(one_line_error([&] { choices.record_default("k", "why"); }),
            "launch variants: k was picked before");
  EXPECT_EQ(one_line_error([&] {
              choices.record("j", {"a", "b"}, {{1.0f, true}});
            }),
            "launch variants: j: 2 names for 1 trials");
  EXPECT_EQ(one_line_error([&] { choices.record("i", {}, {}); }),
            "launch variants: i: 0 names for 0 trials");
}

TEST(LaunchVariants, DescribesAPickInOneLine) {
  LaunchVariantChoices choices;
  choices.record("cross_entropy_forward_backward bf16 n=8192 v=50304",
                 {"one kernel", "one kernel, twice the blocks", "two kernels"},
                 {{0.061f, true}, {0.05f, false}, {0.0755f, true}});
  choices.record_default("attention_backward bf16", "no device memory for the trials");
  EXPECT_EQ(describe(choices.picks()[0]),
            "cross_entropy_forward_backward bf16 n=8192 v=50304: one kernel (one kernel 0.0610 "
            "ms, one kernel, twice the blocks 0.0500 ms different bits, two kernels 0.0755 ms)");
  EXPECT_EQ(describe(choices.picks()[1]),
            "attention_backward bf16: default (no device memory for the trials)");
}

}  // namespace
}  // namespace mds::ops
