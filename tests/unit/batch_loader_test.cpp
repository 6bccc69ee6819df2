// BatchLoader against data.md §5.10–§5.11 and training.md §5.11: the sampler's order from
// consumed_samples, data-parallel slicing, tokens/labels, EOD loss masks and position resets
// (hand-made rows), prefetching that changes nothing, and errors.
#include "data/batch_loader.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/gpt_dataset.h"
#include "io/indexed_dataset.h"
#include "test_support.h"

namespace mds::data {
namespace {

using testing_support::ScratchDir;
using Tokens = std::vector<std::int64_t>;

// A source whose sample i is seq_length + 1 tokens 100·i, 100·i + 1, ...
SampleSource counting_source(std::int64_t size, std::int64_t seq_length) {
  return {"counting", size, [seq_length](std::int64_t i) {
            Tokens text(static_cast<std::size_t>(seq_length + 1));
            std::iota(text.begin(), text.end(), 100 * i);
            return text;
          }};
}

BatchLoaderOptions options(std::int64_t b, std::int64_t dp, std::int64_t rank,
                           std::int64_t consumed, std::int64_t seq_length,
                           std::size_t prefetch = 2) {
  BatchLoaderOptions o;
  o.micro_batch_size = b;
  o.data_parallel_size = dp;
  o.data_parallel_rank = rank;
  o.consumed_samples = consumed;
  o.seq_length = seq_length;
  o.prefetch = prefetch;
  return o;
}

Tokens row(const std::vector<std::int64_t>& values, std::int64_t r, std::int64_t s) {
  return Tokens(values.begin() + r * s, values.begin() + (r + 1) * s);
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const base::Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(BatchLoader, FollowsTheDatasetOrderFromConsumedSamples) {
  // The synthetic 10-document dataset of data.md §8.4 (tokens 0..56), 15 samples of 8.
  ScratchDir dir;
  const std::string prefix = dir.file("synthetic");
  {
    io::IndexedDatasetBuilder builder(prefix, io::DType::kUInt16, io::DatasetImpl::kMmap);
    std::int32_t next = 0;
    for (const std::int32_t size : {5, 3, 12, 1, 7, 9, 2, 4, 6, 8}) {
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(size));
      std::iota(tokens.begin(), tokens.end(), next);
      next += size;
      builder.add_item(tokens);
      builder.end_document();
    }
    builder.finalize();
  }
  auto data = std::make_shared<const io::IndexedDataset>(io::IndexedDataset::open(prefix));
  auto dataset = std::make_shared<const GptDataset>(
      GptDataset::create(data, {"train", prefix, {0, 10}, 15, 8, 1234}));
  ASSERT_EQ(dataset->size(), 21);
  // 3 consumed, b = 2: samples 3,4 | 5,6 | ... | 19,20 (9 micro-batches).
  BatchLoader loader(make_sample_source("train", dataset), options(2, 1, 0, 3, 8));
  EXPECT_EQ(loader.remaining(), 9);
  std::int64_t expected = 3;
  for (int step = 0; step < 9; ++step) {
    const MicroBatchArrays batch = loader.next();
    ASSERT_EQ(batch.batch_size, 2);
    ASSERT_EQ(batch.seq_length, 8);
    for (std::int64_t r = 0; r < 2; ++r, ++expected) {
      EXPECT_EQ(batch.sample_indices[static_cast<std::size_t>(r)], expected);
      const Tokens text = dataset->sample(expected);
      EXPECT_EQ(row(batch.tokens, r, 8), Tokens(text.begin(), text.end() - 1));
      EXPECT_EQ(row(batch.labels, r, 8), Tokens(text.begin() + 1, text.end()));
      EXPECT_EQ(row(batch.position_ids, r, 8), (Tokens{0, 1, 2, 3, 4, 5, 6, 7}));
    }
    EXPECT_EQ(loader.consumed_samples(), expected);
  }
  EXPECT_EQ(loader.remaining(), 0);
  const std::string error = error_of([&] { loader.next(); });
  EXPECT_NE(error.find("dataset train is exhausted"), std::string::npos) << error;
  // data.md §8.4 ds[3] is the first row of the first batch.
  BatchLoader again(make_sample_source("train", dataset), options(1, 1, 0, 3, 8, 0));
  EXPECT_EQ(again.next().tokens, (Tokens{47, 48, 43, 44, 45, 46, 47, 48}));
}

TEST(BatchLoader, DataParallelRanksTakeTheirSliceOfEachBlock) {
  const SampleSource source = counting_source(13, 4);
  // b = 2, D = 2, consumed 1: blocks [1..4], [5..8], [9..12]; rank 0 takes the first half.
  BatchLoader rank0(source, options(2, 2, 0, 1, 4));
  BatchLoader rank1(source, options(2, 2, 1, 1, 4));
  const std::vector<Tokens> want0 = {{1, 2}, {5, 6}, {9, 10}};
  const std::vector<Tokens> want1 = {{3, 4}, {7, 8}, {11, 12}};
  for (std::size_t step = 0; step < 3; ++step) {
    EXPECT_EQ(rank0.next().sample_indices, want0[step]);
    const MicroBatchArrays batch = rank1.next();
    EXPECT_EQ(batch.sample_indices, want1[step]);
    EXPECT_EQ(row(batch.tokens, 1, 4),
              (Tokens{100 * want1[step][1], 100 * want1[step][1] + 1, 100 * want1[step][1] + 2,
                      100 * want1[step][1] + 3}));
    EXPECT_EQ(row(batch.labels, 0, 4)[3], 100 * want1[step][0] + 4);
  }
  EXPECT_EQ(rank0.consumed_samples(), 13);  // the whole group's count, not this rank's
  EXPECT_THROW(rank0.next(), base::Error);  // sample 0 was consumed, no partial block
}

TEST(BatchLoader, PrefetchingChangesNothing) {
  const SampleSource source = counting_source(64, 6);
  for (const std::size_t prefetch : {1u, 3u, 8u}) {
    BatchLoader plain(source, options(3, 2, 1, 5, 6, 0));
    BatchLoader ahead(source, options(3, 2, 1, 5, 6, prefetch));
    ASSERT_EQ(plain.remaining(), ahead.remaining());
    while (plain.remaining() > 0) {
      const MicroBatchArrays a = plain.next();
      const MicroBatchArrays b = ahead.next();
      EXPECT_EQ(a.sample_indices, b.sample_indices);
      EXPECT_EQ(a.tokens, b.tokens);
      EXPECT_EQ(a.labels, b.labels);
      EXPECT_EQ(a.loss_mask, b.loss_mask);
      EXPECT_EQ(a.position_ids, b.position_ids);
    }
  }
  // Destroyed with batches still queued: the worker stops cleanly.
  BatchLoader left(source, options(1, 1, 0, 0, 6, 4));
  left.next();
}

TEST(BatchLoader, EodMasksAndPositionResets) {
  constexpr std::int64_t kEod = 0;
  const std::vector<Tokens> texts = {
      {5, kEod, 7, 8, kEod, kEod, 9, 3},  // input row: 5 E 7 8 E E 9
      {kEod, 1, 2, 3, 4, 5, 6, kEod},     // EOD first; the last label is EOD
      {1, 2, 3, 4, 5, 6, 7, 8},           // no EOD
  };
  const SampleSource source{"hand", 3,
                            [&](std::int64_t i) { return texts[static_cast<std::size_t>(i)]; }};
  BatchLoaderOptions o = options(3, 1, 0, 0, 7);
  o.batch.eod_token = kEod;

  {
    BatchLoader loader(source, o);  // neither flag: all ones, 0..6
    const MicroBatchArrays batch = loader.next();
    EXPECT_EQ(batch.loss_mask, std::vector<float>(21, 1.0f));
    for (std::int64_t r = 0; r < 3; ++r) {
      EXPECT_EQ(row(batch.position_ids, r, 7), (Tokens{0, 1, 2, 3, 4, 5, 6}));
    }
  }
  o.batch.eod_mask_loss = true;
  o.batch.reset_position_ids = true;
  BatchLoader loader(source, o);
  const MicroBatchArrays batch = loader.next();
  EXPECT_EQ(row(batch.tokens, 0, 7), (Tokens{5, kEod, 7, 8, kEod, kEod, 9}));
  EXPECT_EQ(row(batch.labels, 1, 7), (Tokens{1, 2, 3, 4, 5, 6, kEod}));
  // The prediction made from an EOD is masked, not the prediction of an EOD.
  EXPECT_EQ(std::vector<float>(batch.loss_mask.begin(), batch.loss_mask.begin() + 7),
            (std::vector<float>{1, 0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(std::vector<float>(batch.loss_mask.begin() + 7, batch.loss_mask.begin() + 14),
            (std::vector<float>{0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(row(batch.position_ids, 0, 7), (Tokens{0, 1, 0, 1, 2, 0, 0}));
  EXPECT_EQ(row(batch.position_ids, 1, 7), (Tokens{0, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(row(batch.position_ids, 2, 7), (Tokens{0, 1, 2, 3, 4, 5, 6}));

  // Either flag alone.
  std::vector<float> mask(7);
  Tokens positions(7);
  const Tokens input = {5, kEod, 7, 8, kEod, kEod, 9};
  ltor_row(input, {kEod, false, true}, mask, positions);
  EXPECT_EQ(mask, std::vector<float>(7, 1.0f));
  EXPECT_EQ(positions, (Tokens{0, 1, 0, 1, 2, 0, 0}));
  ltor_row(input, {kEod, true, false}, mask, positions);
  EXPECT_EQ(mask, (std::vector<float>{1, 0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(positions, (Tokens{0, 1, 2, 3, 4, 5, 6}));
}

TEST(BatchLoader, TooSmallDatasetsFailClearly) {
  const std::string small =
      error_of([] { BatchLoader(counting_source(3, 4), options(2, 2, 0, 0, 4)); });
  EXPECT_NE(small.find("dataset counting is too small"), std::string::npos) << small;
  const std::string consumed =
      error_of([] { BatchLoader(counting_source(8, 4), options(1, 1, 0, 8, 4)); });
  EXPECT_NE(consumed.find("no samples left to consume"), std::string::npos) << consumed;
  const std::string empty =
      error_of([] { BatchLoader(counting_source(0, 4), options(1, 1, 0, 0, 4)); });
  EXPECT_NE(empty.find("no sample"), std::string::npos) << empty;
  EXPECT_THROW(BatchLoader(counting_source(8, 4), options(1, 2, 2, 0, 4)), base::Error);
  BatchLoaderOptions needs_eod = options(1, 1, 0, 0, 4);
  needs_eod.batch.eod_mask_loss = true;
  EXPECT_THROW(BatchLoader(counting_source(8, 4), needs_eod), base::Error);
}

TEST(BatchLoader, WorkerErrorsReachTheCaller) {
  for (const std::size_t prefetch : {0u, 2u}) {
    const SampleSource failing{"flaky", 10, [](std::int64_t i) -> Tokens {
                                 if (i == 5) throw base::Error("sample 5 is unreadable");
                                 return Tokens(5, i);
                               }};
    BatchLoader loader(failing, options(2, 1, 0, 0, 4, prefetch));
    loader.next();
    loader.next();
    EXPECT_EQ(error_of([&] { loader.next(); }), "sample 5 is unreadable");
    EXPECT_EQ(error_of([&] { loader.next(); }), "sample 5 is unreadable");
    EXPECT_EQ(loader.consumed_samples(), 4);
  }
  const SampleSource short_samples{"short", 4, [](std::int64_t) { return Tokens(3, 1); }};
  BatchLoader loader(short_samples, options(1, 1, 0, 0, 4));
  const std::string error = error_of([&] { loader.next(); });
  EXPECT_NE(error.find("has 3 tokens, expected seq_length + 1 = 5"), std::string::npos) << error;
}

}  // namespace
}  // namespace mds::data
