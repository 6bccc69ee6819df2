// --split and mode-2 weighted split paths against data.md §5.3, §5.4 and §8.5 (verified upstream).
#include "data/dataset_split.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

#include "base/error.h"

namespace mds::data {
namespace {

using Bounds = std::array<std::int64_t, 4>;

TEST(SplitString, UpstreamExamples) {
  EXPECT_EQ(split_boundaries("969, 30, 1", 1000), (Bounds{0, 969, 999, 1000}));
  EXPECT_EQ(split_boundaries("969,30,1", 10), (Bounds{0, 10, 10, 10}));
  EXPECT_EQ(split_boundaries("949,50,1", 100), (Bounds{0, 95, 100, 100}));
  EXPECT_EQ(split_boundaries("90/5/5", 33), (Bounds{0, 29, 31, 33}));
  EXPECT_EQ(split_boundaries("1,1,1", 10), (Bounds{0, 4, 7, 10}));
  EXPECT_EQ(split_boundaries("1,1,1", 11), (Bounds{0, 3, 7, 11}));
  EXPECT_EQ(split_boundaries("98,2,0", 7), (Bounds{0, 7, 7, 7}));
  EXPECT_EQ(split_boundaries("1", 5), (Bounds{0, 5, 5, 5}));
  EXPECT_EQ(split_boundaries("2,1,1", 6), (Bounds{0, 2, 4, 6}));
  EXPECT_EQ(split_boundaries("969, 30, 1", 300), (Bounds{0, 291, 300, 300}));
}

// 0.5 × 3 = 1.5 rounds to 2 (half-even), 1.5 again to 2: idx [0,2,4,4], diff 1 shifts every
// boundary after the first.
TEST(SplitString, HalfEvenRoundingAndTheDiffShift) {
  EXPECT_EQ(split_boundaries("0.5,0.5", 3), (Bounds{0, 1, 3, 3}));
  EXPECT_EQ(python_round(0.5), 0);
  EXPECT_EQ(python_round(1.5), 2);
  EXPECT_EQ(python_round(2.5), 2);
  EXPECT_EQ(python_round(-0.5), 0);
  EXPECT_EQ(python_round(2.5000000001), 3);
}

TEST(SplitString, PadsAndTruncatesToThree) {
  EXPECT_EQ(split_boundaries("1,1", 4), (Bounds{0, 2, 4, 4}));
  EXPECT_EQ(split_boundaries("1,1,1,100", 9), (Bounds{0, 3, 6, 9}));  // a fourth is ignored
  EXPECT_EQ(split_boundaries(" 8 / 2 ", 10), (Bounds{0, 8, 10, 10}));
  EXPECT_EQ(split_boundaries("+1e2,0,0", 3), (Bounds{0, 3, 3, 3}));
}

TEST(SplitString, RangesNameTheSplits) {
  const auto ranges = split_document_ranges("969, 30, 1", 300);
  EXPECT_EQ(ranges[0], (DocumentRange{0, 291}));
  EXPECT_EQ(ranges[1], (DocumentRange{291, 300}));
  EXPECT_TRUE(ranges[2].empty());
  EXPECT_EQ(ranges[1].size(), 9);
}

TEST(SplitString, BadStringsFailClearly) {
  for (const char* bad : {"", "a,b,c", "969,,1", "0,0,0", "1,-1,1", "inf", "nan,1", "1 2"}) {
    try {
      split_boundaries(bad, 10);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const base::Error& error) {
      EXPECT_NE(std::string(error.what()).find("--split"), std::string::npos) << error.what();
    }
  }
}

TEST(SplitWeightedPaths, RangesUsePythonRounding) {
  EXPECT_EQ(split_by_range(0, 0.6, 7), (DocumentRange{0, 4}));
  EXPECT_EQ(split_by_range(0.25, 0.75, 2), (DocumentRange{0, 2}));
  EXPECT_EQ(split_by_range(0.6, 0.8, 10), (DocumentRange{6, 8}));
  EXPECT_THROW(split_by_range(0, 1.5, 10), base::Error);
}

TEST(SplitWeightedPaths, ParsesAGroup) {
  const auto group = parse_weighted_split_group("TRAIN: 0.3 0:0.6 /data/a, 0.7 0.5:1 /data/b ");
  EXPECT_EQ(group.name, "TRAIN");
  ASSERT_EQ(group.paths.size(), 2u);
  EXPECT_EQ(group.paths[0].weight, 0.3);
  EXPECT_EQ(group.paths[0].start, 0.0);
  EXPECT_EQ(group.paths[0].end, 0.6);
  EXPECT_EQ(group.paths[0].prefix, "/data/a");
  EXPECT_EQ(group.paths[1].start, 0.5);
  EXPECT_EQ(group.paths[1].prefix, "/data/b");
}

TEST(SplitWeightedPaths, BadGroupsFailQuotingThePart) {
  const struct {
    const char* text;
    const char* fragment;
  } cases[] = {
      {"no colon here", "no ':'"},
      {": 1 0:1 /a", "name is empty"},
      {"T: 1 0:1", "exactly 3 fields"},
      {"T: 1 0:1 /a extra", "exactly 3 fields"},
      {"T: 1 0-1 /a", "START:END"},
      {"T: 1 0.5:0.5 /a", "greater or equal"},
      {"T: x 0:1 /a", "weight"},
      {"T: 1 0:1.2 /a", "within 0:1"},
      {"T: 1 0:1 /a,", "exactly 3 fields"},
  };
  for (const auto& c : cases) {
    try {
      parse_weighted_split_group(c.text);
      ADD_FAILURE() << "accepted '" << c.text << "'";
    } catch (const base::Error& error) {
      EXPECT_NE(std::string(error.what()).find(c.fragment), std::string::npos) << error.what();
    }
  }
}

TEST(SplitWeightedPaths, PathFileHoldsOneLineOfQuotedGroups) {
  EXPECT_EQ(parse_weighted_split_paths_file("\"A: 1 0:1 /a\" \"B: 1 0:0.5 /b\"\n", "f"),
            (std::vector<std::string>{"A: 1 0:1 /a", "B: 1 0:0.5 /b"}));
  EXPECT_EQ(parse_weighted_split_paths_file("\"A: 1 0:1 /a\"", "f").size(), 1u);
  EXPECT_THROW(parse_weighted_split_paths_file("\"A\"\n\"B\"\n", "f"), base::Error);
  EXPECT_THROW(parse_weighted_split_paths_file("A: 1 0:1 /a\n", "f"), base::Error);
  EXPECT_THROW(parse_weighted_split_paths_file("\"A: 1 0:1 /a\n", "f"), base::Error);
  EXPECT_THROW(parse_weighted_split_paths_file("\n", "f"), base::Error);
}

}  // namespace
}  // namespace mds::data
