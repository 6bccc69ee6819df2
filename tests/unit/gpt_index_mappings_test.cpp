// GPTDataset index maps and samples against data.md §5.6, §5.7 and §8.4 (verified upstream) on the
// synthetic 10-document dataset whose tokens are 0..56, plus the cache files and their checks.
#include "data/gpt_index_mappings.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/gpt_dataset.h"
#include "test_support.h"

namespace mds::data {
namespace {

using testing_support::read_file;
using testing_support::ScratchDir;
using testing_support::write_file;
using Tokens = std::vector<std::int64_t>;

const std::vector<std::int32_t> kSizes = {5, 3, 12, 1, 7, 9, 2, 4, 6, 8};

// Document k holds the next sizes[k] integers, so every token names its position.
std::string write_synthetic_dataset(const ScratchDir& dir) {
  const std::string prefix = dir.file("synthetic");
  io::IndexedDatasetBuilder builder(prefix, io::DType::kUInt16, io::DatasetImpl::kMmap);
  std::int32_t next = 0;
  for (const std::int32_t size : kSizes) {
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(size));
    std::iota(tokens.begin(), tokens.end(), next);
    next += size;
    builder.add_item(tokens);
    builder.end_document();
  }
  builder.finalize();
  return prefix;
}

IndexMapRequest request(const std::string& prefix, std::int64_t num_samples,
                        DocumentRange documents = {0, 10}, const std::string& name = "train") {
  return {name, prefix, documents, num_samples, 8, 1234};
}

std::vector<std::int64_t> shuffle_of(const IndexMappings& maps) {
  return {maps.shuffle_idx_u32.begin(), maps.shuffle_idx_u32.end()};
}

TEST(GptIndexMappings, SeparateLastEpoch) {
  std::vector<std::string> log;
  const auto maps = build_index_mappings(kSizes, request("/nowhere/x", 15),
                                         [&](const std::string& line) { log.push_back(line); });
  EXPECT_EQ(maps.tokens_per_epoch, 57);
  EXPECT_EQ(maps.num_epochs, 3);
  EXPECT_TRUE(maps.separate_last_epoch);
  EXPECT_EQ(maps.shuffle_split, 14);
  EXPECT_EQ(maps.doc_idx, (std::vector<std::int32_t>{3, 3, 2, 6, 4, 5, 4, 0, 8, 8, 7, 1, 0, 9, 7,
                                                     1, 9, 2, 6, 5, 8, 1, 7, 6, 9, 5, 4, 3, 0, 2}));
  EXPECT_EQ(maps.sample_idx,
            (std::vector<std::int32_t>{0,  0,  2,  6,  4,  0,  5,  1,  6,  0,  7,  1,  8,  4,  10,
                                       0,  12, 1,  13, 4,  15, 0,  16, 5,  17, 5,  18, 1,  19, 7,
                                       21, 0,  23, 1,  24, 7,  25, 7,  26, 6,  29, 1,  29, 9}));
  EXPECT_EQ(maps.num_samples(), 21);
  EXPECT_FALSE(maps.shuffle_is_int64());
  EXPECT_EQ(shuffle_of(maps), (std::vector<std::int64_t>{10, 5,  13, 6,  1,  4,  8,  2,  3,  12, 9,
                                                         0,  11, 7,  15, 14, 19, 16, 18, 17, 20}));
  EXPECT_EQ(log, (std::vector<std::string>{
                     " > last epoch number of samples (1) is smaller than 95.0% of number of "
                     "samples per epoch (7), setting separate_last_epoch to True",
                     " > building shuffle index with split [0, 14) and [14, 21) ..."}));
}

TEST(GptIndexMappings, OneEpoch) {
  std::vector<std::string> log;
  const auto maps = build_index_mappings(kSizes, request("/nowhere/x", 5),
                                         [&](const std::string& line) { log.push_back(line); });
  EXPECT_EQ(maps.num_epochs, 1);
  EXPECT_EQ(maps.doc_idx, (std::vector<std::int32_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));
  EXPECT_EQ(maps.sample_idx,
            (std::vector<std::int32_t>{0, 0, 1, 4, 2, 0, 3, 0, 5, 0, 6, 2, 7, 3, 9, 0}));
  EXPECT_EQ(shuffle_of(maps), (std::vector<std::int64_t>{6, 4, 0, 5, 3, 2, 1}));
  EXPECT_EQ(log, (std::vector<std::string>{
                     " > only one epoch required, setting separate_last_epoch to False",
                     " > building shuffle index with split [0, 7) and [7, 7) ..."}));
}

TEST(GptIndexMappings, LastEpochLargeEnoughIsNotSeparate) {
  const auto maps = build_index_mappings(kSizes, request("/nowhere/x", 20));
  EXPECT_EQ(maps.num_epochs, 3);
  EXPECT_FALSE(maps.separate_last_epoch);
  EXPECT_EQ(maps.doc_idx, (std::vector<std::int32_t>{7, 0, 4, 1, 8, 8, 3, 3, 4, 3, 2, 4, 0, 2, 7,
                                                     6, 8, 5, 6, 5, 1, 9, 7, 9, 0, 2, 1, 6, 9, 5}));
  EXPECT_EQ(shuffle_of(maps), (std::vector<std::int64_t>{8,  20, 14, 9,  6, 0,  4, 5,  13, 18, 7,
                                                         15, 17, 10, 16, 3, 11, 1, 12, 19, 2}));
}

TEST(GptIndexMappings, TinyValidSplitAndUpstreamsAssertion) {
  const auto maps = build_index_mappings(kSizes, request("/nowhere/x", 2, {8, 10}, "valid"));
  EXPECT_EQ(maps.doc_idx, (std::vector<std::int32_t>{8, 9, 8, 9}));
  EXPECT_EQ(maps.sample_idx, (std::vector<std::int32_t>{0, 0, 1, 2, 2, 2, 3, 4}));
  EXPECT_EQ(shuffle_of(maps), (std::vector<std::int64_t>{1, 2, 0}));
  try {
    build_index_mappings(kSizes, request("/nowhere/x", 3, {8, 10}, "valid"));
    ADD_FAILURE() << "no assertion";
  } catch (const base::Error& error) {
    EXPECT_STREQ(error.what(),
                 "AssertionError: last epoch number of samples 2 exceeded max value 1.");
  }
}

TEST(GptIndexMappings, RefusesWhatUpstreamWouldLoopOnOrMisindex) {
  const std::vector<std::int32_t> sizes = {0, 0, 4};
  EXPECT_THROW(build_index_mappings(sizes, request("/x", 1, {0, 2})), base::Error);  // no tokens
  EXPECT_THROW(build_index_mappings(sizes, request("/x", 1, {1, 4})), base::Error);  // past end
  EXPECT_THROW(build_index_mappings(sizes, request("/x", 1, {2, 2})), base::Error);  // empty
  IndexMapRequest bad_seed = request("/x", 1, {0, 3});
  bad_seed.seed = -1;
  EXPECT_THROW(build_index_mappings(sizes, bad_seed), base::Error);
  // Zero-length documents are stepped over.
  EXPECT_EQ(build_index_mappings(sizes, request("/x", 0, {0, 3})).num_samples(), 0);
}

TEST(GptIndexMappings, CacheFileNamesAndBytes) {
  ScratchDir dir;
  const std::string prefix = write_synthetic_dataset(dir);
  const auto paths = index_map_paths(request(prefix, 15));
  EXPECT_EQ(paths.doc_idx, prefix + "_train_indexmap_15ns_8sl_1234s_doc_idx.npy");
  EXPECT_EQ(paths.sample_idx, prefix + "_train_indexmap_15ns_8sl_1234s_sample_idx.npy");
  EXPECT_EQ(paths.shuffle_idx, prefix + "_train_indexmap_15ns_8sl_1234s_shuffle_idx.npy");
  const auto maps = build_index_mappings(kSizes, request(prefix, 15));
  save_index_mappings(maps, paths);
  const std::uint64_t doc_shape[] = {30};
  EXPECT_EQ(read_file(paths.doc_idx),
            io::npy_header(io::NpyDType::kInt32, doc_shape) +
                std::string(reinterpret_cast<const char*>(maps.doc_idx.data()), 30 * 4));
  const std::string sample = read_file(paths.sample_idx);
  EXPECT_NE(sample.find("'shape': (22, 2), }"), std::string::npos);
  EXPECT_EQ(sample.size(), 128u + 22 * 2 * 4);
  const std::string shuffle = read_file(paths.shuffle_idx);
  EXPECT_NE(shuffle.find("{'descr': '<u4', 'fortran_order': False, 'shape': (21,), }"),
            std::string::npos);
}

TEST(GptDataset, ItemsCrossDocuments) {
  ScratchDir dir;
  auto data = std::make_shared<const io::IndexedDataset>(
      io::IndexedDataset::open(write_synthetic_dataset(dir)));
  std::vector<std::string> log;
  const GptDataset ds = GptDataset::create(data, request(data->prefix(), 15),
                                           [&](const std::string& line) { log.push_back(line); });
  ASSERT_EQ(ds.size(), 21);
  EXPECT_EQ(ds.sample(0), (Tokens{5, 6, 7, 49, 50, 51, 52, 53, 54}));
  EXPECT_EQ(ds.sample(1), (Tokens{1, 2, 3, 4, 43, 44, 45, 46, 47}));
  EXPECT_EQ(ds.sample(2), (Tokens{38, 28, 29, 30, 31, 32, 33, 34, 35}));
  EXPECT_EQ(ds.sample(3), (Tokens{47, 48, 43, 44, 45, 46, 47, 48, 39}));
  EXPECT_THROW(ds.sample(21), base::Error);
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.front(),
            " > WARNING: could not find index map files, building the indices on rank 0 ...");
  EXPECT_EQ(log.back(), "    total number of epochs: 3");

  // Every sample is seq_length + 1 consecutive tokens of the epochs' document stream.
  const auto maps = build_index_mappings(kSizes, request(data->prefix(), 15));
  Tokens stream;
  for (const std::int32_t document : maps.doc_idx) {
    const auto tokens = data->get(static_cast<std::size_t>(document));
    stream.insert(stream.end(), tokens.begin(), tokens.end());
  }
  for (std::int64_t i = 0; i < ds.size(); ++i) {
    const auto start = stream.begin() + 8 * shuffle_of(maps)[static_cast<std::size_t>(i)];
    EXPECT_EQ(ds.sample(i), Tokens(start, start + 9)) << "sample " << i;
  }
}

TEST(GptDataset, ReusesCacheFilesAndChecksThem) {
  ScratchDir dir;
  auto data = std::make_shared<const io::IndexedDataset>(
      io::IndexedDataset::open(write_synthetic_dataset(dir)));
  const GptDataset first = GptDataset::create(data, request(data->prefix(), 15));
  // Same name, other documents: upstream (and we) reuse the files, as the range is not in the name.
  std::vector<std::string> log;
  const GptDataset again =
      GptDataset::create(data, request(data->prefix(), 15, {0, 5}),
                         [&](const std::string& line) { log.push_back(line); });
  EXPECT_EQ(again.sample(0), first.sample(0));
  EXPECT_EQ(log.front().rfind(" > loading doc-idx mapping from ", 0), 0u);

  const auto paths = index_map_paths(request(data->prefix(), 15));
  const std::vector<std::uint32_t> short_shuffle = {0, 1};
  const std::uint64_t two[] = {2};
  io::save_npy(paths.shuffle_idx, std::span<const std::uint32_t>(short_shuffle), two);
  try {
    GptDataset::create(data, request(data->prefix(), 15));
    ADD_FAILURE() << "inconsistent cache accepted";
  } catch (const base::Error& error) {
    EXPECT_NE(std::string(error.what()).find("inconsistent"), std::string::npos) << error.what();
  }
  write_file(paths.sample_idx, "garbage");
  EXPECT_THROW(GptDataset::create(data, request(data->prefix(), 15)), base::Error);

  // A doc_idx naming a sequence the dataset lacks fails when read, not out of bounds.
  const auto stale = request(data->prefix(), 5, {0, 10}, "stale");
  auto maps = build_index_mappings(kSizes, stale);
  maps.doc_idx[0] = 99;
  save_index_mappings(maps, index_map_paths(stale));
  const GptDataset bad = GptDataset::create(data, stale);
  bool failed = false;
  for (std::int64_t i = 0; i < bad.size(); ++i) {
    try {
      bad.sample(i);
    } catch (const base::Error& error) {
      failed = true;
      EXPECT_NE(std::string(error.what()).find("stale"), std::string::npos) << error.what();
    }
  }
  EXPECT_TRUE(failed);
}

TEST(BlendedDataset, DrawsFromComponentsByWeight) {
  ScratchDir dir;
  auto data = std::make_shared<const io::IndexedDataset>(
      io::IndexedDataset::open(write_synthetic_dataset(dir)));
  auto train =
      std::make_shared<const GptDataset>(GptDataset::create(data, request(data->prefix(), 5)));
  auto valid = std::make_shared<const GptDataset>(
      GptDataset::create(data, request(data->prefix(), 2, {8, 10}, "valid")));
  const std::vector<double> weights = {0.7, 0.3};
  const BlendedDataset blend({train, valid}, weights);
  ASSERT_EQ(blend.size(), train->size() + valid->size());  // 7 + 3
  EXPECT_EQ(blend.indices().dataset_index,
            (std::vector<std::uint8_t>{0, 1, 0, 0, 1, 0, 0, 1, 0, 0}));
  for (std::int64_t i = 0; i < blend.size(); ++i) {
    const auto index = static_cast<std::size_t>(i);
    const GptDataset& component = blend.indices().dataset_index[index] == 0 ? *train : *valid;
    EXPECT_EQ(blend.sample(i), component.sample(blend.indices().dataset_sample_index[index]));
  }
  EXPECT_THROW(BlendedDataset({train}, weights), base::Error);
}

}  // namespace
}  // namespace mds::data
