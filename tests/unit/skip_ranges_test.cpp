#include "train/skip_ranges.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace mds::train {
namespace {

std::vector<IterationRange> parse(std::vector<std::string> words) {
  return parse_skip_train_iteration_ranges(words);
}

std::string error_of(std::vector<std::string> words) {
  try {
    parse(std::move(words));
  } catch (const base::Error& e) {
    return e.what();
  }
  return "no error";
}

// upstream's parser: each word split at '-' and read by int(), sorted, overlapping ranges merged.
TEST(SkipRanges, ParsedSortedAndMergedAsUpstream) {
  EXPECT_EQ(parse({"251-300", "101-200"}), (std::vector<IterationRange>{{101, 200}, {251, 300}}));
  EXPECT_EQ(parse({"1-5", "2-6"}), (std::vector<IterationRange>{{1, 6}}));
  EXPECT_EQ(parse({"2-3", "1-10", "4-12"}), (std::vector<IterationRange>{{1, 12}}));
  // Touching ranges are not merged (end >= start is the test), which skips the same iterations.
  EXPECT_EQ(parse({"6-8", "1-5"}), (std::vector<IterationRange>{{1, 5}, {6, 8}}));
  EXPECT_EQ(parse({"7-7"}), (std::vector<IterationRange>{{7, 7}}));
  // int() allows spaces around the number and underscores between digits.
  EXPECT_EQ(parse({" 1_000 - 2_000 "}), (std::vector<IterationRange>{{1000, 2000}}));
}

TEST(SkipRanges, BadWordsFailNamingTheWord) {
  const std::string shape = "' is not a range START-END (two numbers, e.g. 101-200)";
  EXPECT_EQ(error_of({"10"}), "--skip-train-iteration-range: '10" + shape);
  EXPECT_EQ(error_of({"1-2-3"}), "--skip-train-iteration-range: '1-2-3" + shape);
  EXPECT_EQ(error_of({"1-", "5-6"}), "--skip-train-iteration-range: '1-" + shape);
  EXPECT_EQ(error_of({"a-b"}), "--skip-train-iteration-range: 'a-b" + shape);
  EXPECT_EQ(error_of({"1-2", "9-3"}), "--skip-train-iteration-range: '9-3' ends before it starts");
}

TEST(SkipRanges, TakesTheHeadWhenTheNextIterationFallsInIt) {
  SkipRanges ranges({{3, 4}, {8, 9}}, 0);
  EXPECT_FALSE(ranges.take(0));  // iteration 1
  EXPECT_FALSE(ranges.take(1));  // iteration 2
  EXPECT_EQ(ranges.take(2), (IterationRange{3, 4}));
  EXPECT_FALSE(ranges.take(2));  // the iteration count stays; the next range lies ahead
  EXPECT_FALSE(ranges.take(6));
  EXPECT_EQ(ranges.take(8), (IterationRange{8, 9}));  // iteration 9, inside the range
  EXPECT_TRUE(ranges.remaining().empty());
  EXPECT_FALSE(ranges.take(8));
}

// A resumed run drops the ranges that end at or before its iteration. Upstream drops only those
// ending before it, so resuming at 200 with 101-200 and 301-400 would never skip 301-400.
TEST(SkipRanges, ResumedRunDropsRangesEndingAtOrBeforeIt) {
  SkipRanges ranges({{101, 200}, {301, 400}}, 200);
  ASSERT_EQ(ranges.remaining().size(), 1u);
  EXPECT_EQ(ranges.remaining().front(), (IterationRange{301, 400}));
  EXPECT_EQ(ranges.take(300), (IterationRange{301, 400}));

  SkipRanges inside({{101, 200}}, 150);  // resumed inside a range: the rest of it is skipped
  EXPECT_EQ(inside.take(150), (IterationRange{101, 200}));
}

}  // namespace
}  // namespace mds::train
