// ckpt/universal_merge.h: the TP merge rules of convert-to-universal-checkpoint on hand-made
// slices, upstream v0.1's vocabulary padding row, and the round trip through the loader's slicing
// (ckpt/resume_universal.h) for every split.
#include "ckpt/universal_merge.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "ckpt/resume_universal.h"

namespace mds::ckpt {
namespace {

using model::TpSplit;
using Slices = std::vector<std::vector<float>>;

std::vector<float> iota(std::size_t n, float first) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::string error_of(const Slices& slices, const std::vector<std::int64_t>& local, TpSplit split,
                     const std::string& what) {
  try {
    merge_tp_slices(slices, local, split, what);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(UniversalMerge, CatDimFollowsTheSplit) {
  EXPECT_EQ(tp_cat_dim(TpSplit::kColumn), 0);
  EXPECT_EQ(tp_cat_dim(TpSplit::kVocab), 0);
  EXPECT_EQ(tp_cat_dim(TpSplit::kRow), 1);
  EXPECT_EQ(tp_cat_dim(TpSplit::kReplicated), std::nullopt);
}

TEST(UniversalMerge, ColumnParallelSlicesStackTheirRows) {
  // QKV weight [3h/T, h] with T = 2, h = 3: rank 0 rows 0-1, rank 1 rows 2-3.
  const UniversalState merged =
      merge_tp_slices({{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}, {2, 3}, TpSplit::kColumn, "w");
  EXPECT_EQ(merged.shape, (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ(merged.values, iota(12, 0));
  EXPECT_EQ(merged.cat_dim, 0);
  // A column-parallel bias [F/T].
  const UniversalState bias = merge_tp_slices({{1, 2}, {3, 4}, {5, 6}}, {2}, TpSplit::kColumn, "b");
  EXPECT_EQ(bias.shape, (std::vector<std::int64_t>{6}));
  EXPECT_EQ(bias.values, iota(6, 1));
}

TEST(UniversalMerge, RowParallelSlicesSitSideBySideInEachRow) {
  // dense_4h_to_h weight [h, F/T] with h = 2, F/T = 3, T = 2.
  const UniversalState merged =
      merge_tp_slices({{0, 1, 2, 10, 11, 12}, {3, 4, 5, 13, 14, 15}}, {2, 3}, TpSplit::kRow, "w");
  EXPECT_EQ(merged.shape, (std::vector<std::int64_t>{2, 6}));
  EXPECT_EQ(merged.values, (std::vector<float>{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(merged.cat_dim, 1);
  // T = 1 still records the dimension a larger TP size would split (what v0.1 writes).
  const UniversalState one = merge_tp_slices({{0, 1, 2, 3}}, {2, 2}, TpSplit::kRow, "w");
  EXPECT_EQ(one.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(one.values, iota(4, 0));
  EXPECT_EQ(one.cat_dim, 1);
}

TEST(UniversalMerge, ReplicatedParametersAreStoredOnceWithTheirLocalShape) {
  // The position table [max_pos, h] is replicated: v0.1 concatenated it to [T·max_pos, h].
  const std::vector<float> table = iota(8, 0.5f);
  const UniversalState merged =
      merge_tp_slices({table, table, table, table}, {4, 2}, TpSplit::kReplicated, "pos");
  EXPECT_EQ(merged.shape, (std::vector<std::int64_t>{4, 2}));
  EXPECT_EQ(merged.values, table);
  EXPECT_EQ(merged.cat_dim, std::nullopt);
  // NaNs copied bit for bit are equal copies.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const UniversalState with_nan =
      merge_tp_slices({{nan, 1}, {nan, 1}}, {2}, TpSplit::kReplicated, "ln");
  EXPECT_TRUE(std::isnan(with_nan.values[0]));
}

TEST(UniversalMerge, ReplicatedCopiesThatDifferFailNamingTheParameter) {
  const std::string message = error_of({{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2.5f, 3, 5}}, {4},
                                       TpSplit::kReplicated, "3.input_layernorm.weight (exp_avg)");
  EXPECT_EQ(message,
            "3.input_layernorm.weight (exp_avg): TP rank 2's copy differs from TP rank 0's in 2 "
            "of 4 elements (largest difference 1); a parameter replicated over tensor-parallel "
            "ranks must be identical on each")
      << message;
  // -0 and +0 are different bits: not an identical copy.
  EXPECT_NE(error_of({{0.0f}, {-0.0f}}, {1}, TpSplit::kReplicated, "b"), "");
}

TEST(UniversalMerge, SlicesOfTheWrongSizeFail) {
  EXPECT_EQ(error_of({{1, 2, 3, 4}, {1, 2, 3}}, {2, 2}, TpSplit::kColumn, "3.w (fp32)"),
            "3.w (fp32): TP rank 1 holds 3 elements, expected 4");
  EXPECT_NE(error_of({}, {2}, TpSplit::kColumn, "w"), "");
  EXPECT_NE(error_of({{1, 2}}, {2}, TpSplit::kRow, "w"), "");  // no dim 1 to concatenate on
}

TEST(UniversalMerge, VocabularyKeepsItsPaddedRowsAndV01sPaddingRow) {
  // Vp = 6 rows of width 2 over T = 2; the original vocabulary has 5 tokens.
  const UniversalState vocab =
      merge_tp_slices({iota(6, 0), iota(6, 6)}, {3, 2}, TpSplit::kVocab, "embed");
  EXPECT_EQ(vocab.shape, (std::vector<std::int64_t>{6, 2}));
  EXPECT_EQ(vocab.values, iota(12, 0));
  EXPECT_EQ(vocab.cat_dim, 0);
  EXPECT_EQ(vocab_padding_row(vocab, 5), (std::vector<float>{10, 11}));  // the last row
  EXPECT_EQ(vocab_padding_row(vocab, 6), (std::vector<float>{0, 0}));    // no padding rows
}

// What the converter writes, the loader cuts back into the slices it came from, at the same T.
TEST(UniversalMerge, TheLoaderSlicesGiveTheOriginalSlicesBack) {
  struct Case {
    TpSplit split;
    std::vector<std::int64_t> local;
  };
  for (const Case& c : {Case{TpSplit::kColumn, {3, 4}}, Case{TpSplit::kRow, {4, 3}},
                        Case{TpSplit::kVocab, {5, 2}}, Case{TpSplit::kReplicated, {7}}}) {
    for (const std::int64_t tp_size : {1, 2, 4}) {
      std::size_t numel = 1;
      for (const std::int64_t d : c.local) numel *= static_cast<std::size_t>(d);
      Slices slices;
      for (std::int64_t tp = 0; tp < tp_size; ++tp) {
        const float first =
            c.split == TpSplit::kReplicated ? 0.0f : 100.0f * static_cast<float>(tp);
        slices.push_back(iota(numel, first));
      }
      const UniversalState merged = merge_tp_slices(slices, c.local, c.split, "p");
      const UniversalTensor file{merged.shape, merged.values};
      for (std::int64_t tp = 0; tp < tp_size; ++tp) {
        EXPECT_EQ(universal_slice(file, c.local, tp, tp_size, c.split, 1, "p"),
                  slices[static_cast<std::size_t>(tp)])
            << "split " << static_cast<int>(c.split) << ", T = " << tp_size << ", rank " << tp;
      }
    }
  }
}

}  // namespace
}  // namespace mds::ckpt
