// ckpt/resume_universal.h: cutting a universal checkpoint's full tensors for a new TP rank
// (checkpoints.md §3.4), including the vocabulary rows upstream's v0.1 loader gets wrong.
#include "ckpt/resume_universal.h"

#include <gtest/gtest.h>

#include <numeric>

namespace mds::ckpt {
namespace {

using model::TpSplit;

UniversalTensor iota(std::vector<std::int64_t> shape) {
  UniversalTensor t;
  t.shape = std::move(shape);
  std::int64_t n = 1;
  for (const std::int64_t d : t.shape) n *= d;
  t.values.resize(static_cast<std::size_t>(n));
  std::iota(t.values.begin(), t.values.end(), 0.0f);
  return t;
}

TEST(UniversalSlice, ColumnParallelRowsRowParallelColumnsAndReplicatedWhole) {
  const UniversalTensor rows = iota({4, 3});  // e.g. QKV [3h/T·T, h]
  EXPECT_EQ(universal_slice(rows, {2, 3}, 1, 2, TpSplit::kColumn, 0, "x"),
            (std::vector<float>{6, 7, 8, 9, 10, 11}));
  const UniversalTensor columns = iota({2, 4});  // e.g. dense [h, h/T·T]
  EXPECT_EQ(universal_slice(columns, {2, 2}, 0, 2, TpSplit::kRow, 0, "x"),
            (std::vector<float>{0, 1, 4, 5}));
  EXPECT_EQ(universal_slice(columns, {2, 2}, 1, 2, TpSplit::kRow, 0, "x"),
            (std::vector<float>{2, 3, 6, 7}));
  const UniversalTensor replicated = iota({3});  // a LayerNorm: the same on every rank
  EXPECT_EQ(universal_slice(replicated, {3}, 1, 2, TpSplit::kReplicated, 0, "x"),
            replicated.values);
  EXPECT_EQ(universal_slice(rows, {4, 3}, 0, 1, TpSplit::kColumn, 0, "x"), rows.values);
  EXPECT_THROW(universal_slice(iota({6}), {3}, 0, 2, TpSplit::kReplicated, 0, "x"), std::exception);
}

TEST(UniversalSlice, VocabularyRowsAreCutOrZeroPaddedToTheNewPaddedSize) {
  const UniversalTensor vocab = iota({4, 2});  // 3 real tokens + 1 padding row
  // T' = 1 with 6 padded rows: the 4 rows, then zeros (v0.1 would copy its padding row over).
  EXPECT_EQ(universal_slice(vocab, {6, 2}, 0, 1, TpSplit::kVocab, 3, "x"),
            (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0}));
  // T' = 3 with 1 row each: the padding row goes.
  EXPECT_EQ(universal_slice(vocab, {1, 2}, 2, 3, TpSplit::kVocab, 3, "x"),
            (std::vector<float>{4, 5}));
  EXPECT_THROW(universal_slice(vocab, {1, 2}, 0, 2, TpSplit::kVocab, 3, "x"), std::exception);
}

TEST(UniversalSlice, ShapesThatDoNotSplitFailNamingTheFile) {
  const UniversalTensor rows = iota({5, 3});
  try {
    universal_slice(rows, {2, 3}, 0, 2, TpSplit::kColumn, 0, "zero/3.w/fp32.pt");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("zero/3.w/fp32.pt: shape [5, 3] does not split"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mds::ckpt
