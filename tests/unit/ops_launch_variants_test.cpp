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
