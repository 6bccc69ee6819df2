// build_train_valid_test_datasets against data.md §5.3–§5.6: the split ranges, the per-component
// sample counts of a blend (§8.5 "1 A 2 B" → [[34,11,2],[67,21,3]]), mode-2 groups, and the
// failures upstream asserts on.
#include "data/train_datasets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/blending.h"
#include "data/gpt_dataset.h"
#include "io/indexed_dataset.h"
#include "test_support.h"

namespace mds::data {
namespace {

using testing_support::ScratchDir;

// `documents` documents of 10 tokens each; token j of document k is first + 10·k + j, so every
// token tells which dataset and document it came from.
std::string write_dataset(const std::string& prefix, int documents, std::int32_t first) {
  io::IndexedDatasetBuilder builder(prefix, io::DType::kUInt16, io::DatasetImpl::kMmap);
  for (int k = 0; k < documents; ++k) {
    std::vector<std::int32_t> tokens;
    for (int j = 0; j < 10; ++j) tokens.push_back(first + 10 * k + j);
    builder.add_item(tokens);
    builder.end_document();
  }
  builder.finalize();
  return prefix;
}

bool exists(const std::string& path) {
  return std::filesystem::exists(path);
}

std::string cache_file(const std::string& prefix, const std::string& name, std::int64_t samples) {
  return prefix + "_" + name + "_indexmap_" + std::to_string(samples) + "ns_8sl_1234s_doc_idx.npy";
}

TrainDatasetsArgs args_for(std::vector<std::string> data_path, SplitCounts counts) {
  TrainDatasetsArgs args;
  args.data_path = std::move(data_path);
  args.num_samples = counts;
  args.seq_length = 8;
  return args;
}

std::string error_of(const TrainDatasetsArgs& args) {
  try {
    build_train_valid_test_datasets(args);
  } catch (const base::Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(TrainDatasets, OnePrefixIsSplitIntoThreeDocumentRanges) {
  ScratchDir dir;
  const std::string prefix = write_dataset(dir.file("a"), 60, 0);
  TrainDatasetsArgs args = args_for({prefix}, {15, 5, 3});
  args.split = "1,1,1";
  std::vector<std::string> log;
  const auto datasets =
      build_train_valid_test_datasets(args, [&](const std::string& line) { log.push_back(line); });
  ASSERT_TRUE(datasets.train);
  ASSERT_EQ(datasets.valid.size(), 1u);
  ASSERT_EQ(datasets.test.size(), 1u);
  EXPECT_EQ(datasets.train->name, "train");
  EXPECT_EQ(datasets.valid[0].name, "valid");
  EXPECT_EQ(datasets.test[0].name, "test");
  EXPECT_TRUE(exists(cache_file(prefix, "train", 15)));
  EXPECT_TRUE(exists(cache_file(prefix, "valid", 5)));
  EXPECT_TRUE(exists(cache_file(prefix, "test", 3)));
  const auto has = [&](const std::string& line) {
    return std::find(log.begin(), log.end(), line) != log.end();
  };
  EXPECT_TRUE(has(" > dataset split:"));
  EXPECT_TRUE(has("    validation:"));
  EXPECT_TRUE(has("     document indices in [20, 40) total of 20 documents"));
  EXPECT_TRUE(has("    number of documents: 60"));
  EXPECT_TRUE(has("    validation: 5"));
  EXPECT_EQ(log.back(), "> finished creating GPT datasets ...");

  // The same as a GptDataset built on its own (in another folder, so no cache is shared).
  ScratchDir other;
  auto data = std::make_shared<const io::IndexedDataset>(
      io::IndexedDataset::open(write_dataset(other.file("a"), 60, 0)));
  const std::array<DocumentRange, 3> ranges = {{{0, 20}, {20, 40}, {40, 60}}};
  const std::array<const SampleSource*, 3> sources = {&*datasets.train, &datasets.valid[0],
                                                      &datasets.test[0]};
  const std::array<const char*, 3> names = {"train", "valid", "test"};
  for (std::size_t k = 0; k < 3; ++k) {
    const GptDataset direct = GptDataset::create(
        data, {names[k], data->prefix(), ranges[k], args.num_samples[k], 8, 1234});
    ASSERT_EQ(sources[k]->size, direct.size()) << names[k];
    for (std::int64_t i = 0; i < direct.size(); ++i) {
      const auto tokens = sources[k]->sample(i);
      EXPECT_EQ(tokens, direct.sample(i)) << names[k] << " sample " << i;
      // Every token lies in the split's documents.
      for (const std::int64_t token : tokens) {
        EXPECT_GE(token / 10, ranges[k].begin);
        EXPECT_LT(token / 10, ranges[k].end);
      }
    }
  }
}

TEST(TrainDatasets, EmptyRangesHaveNoDataset) {
  ScratchDir dir;
  const std::string prefix = write_dataset(dir.file("a"), 7, 0);
  TrainDatasetsArgs args = args_for({prefix}, {5, 5, 5});
  args.split = "98,2,0";  // data.md §8.5: [0, 7, 7, 7]
  const auto datasets = build_train_valid_test_datasets(args);
  EXPECT_TRUE(datasets.train);
  EXPECT_TRUE(datasets.valid.empty());
  EXPECT_TRUE(datasets.test.empty());
  EXPECT_FALSE(exists(cache_file(prefix, "valid", 5)));
}

TEST(TrainDatasets, DefaultSplitIsUpstreams) {
  ScratchDir dir;
  const std::string prefix = write_dataset(dir.file("a"), 100, 0);
  std::vector<std::string> log;
  // "969, 30, 1" of 100 documents: [0, 97, 100, 100].
  const auto datasets = build_train_valid_test_datasets(
      args_for({prefix}, {5, 5, 5}), [&](const std::string& line) { log.push_back(line); });
  EXPECT_TRUE(datasets.train);
  EXPECT_EQ(datasets.valid.size(), 1u);
  EXPECT_TRUE(datasets.test.empty());
  EXPECT_NE(
      std::find(log.begin(), log.end(), "     document indices in [97, 100) total of 3 documents"),
      log.end());
}

TEST(TrainDatasets, BlendUsesSpecSampleCounts) {
  ScratchDir dir;
  const std::string a = write_dataset(dir.file("A"), 60, 0);
  const std::string b = write_dataset(dir.file("B"), 60, 1000);
  TrainDatasetsArgs args = args_for({"1", a, "2", b}, {100, 30, 3});
  args.split = "1,1,1";
  std::vector<std::string> log;
  const auto datasets =
      build_train_valid_test_datasets(args, [&](const std::string& line) { log.push_back(line); });
  // data.md §8.5: weights "1 A 2 B", targets [100,30,3] → [[34,11,2],[67,21,3]].
  EXPECT_TRUE(exists(cache_file(a, "train", 34)));
  EXPECT_TRUE(exists(cache_file(a, "valid", 11)));
  EXPECT_TRUE(exists(cache_file(a, "test", 2)));
  EXPECT_TRUE(exists(cache_file(b, "train", 67)));
  EXPECT_TRUE(exists(cache_file(b, "valid", 21)));
  EXPECT_TRUE(exists(cache_file(b, "test", 3)));
  ASSERT_TRUE(datasets.train);
  ASSERT_EQ(datasets.valid.size(), 1u);
  ASSERT_EQ(datasets.test.size(), 1u);
  EXPECT_NE(std::find(log.begin(), log.end(), "> building indices for blendable datasets ..."),
            log.end());

  // The blend interleaves the two components as build_blending_indices says.
  auto data_a = std::make_shared<const io::IndexedDataset>(io::IndexedDataset::open(a));
  auto data_b = std::make_shared<const io::IndexedDataset>(io::IndexedDataset::open(b));
  const GptDataset train_a = GptDataset::create(data_a, {"train", a, {0, 20}, 34, 8, 1234});
  const GptDataset train_b = GptDataset::create(data_b, {"train", b, {0, 20}, 67, 8, 1234});
  ASSERT_EQ(datasets.train->size, train_a.size() + train_b.size());
  const std::vector<double> once = normalize_weights(std::vector<double>{1, 2});
  const BlendingIndices indices = build_blending_indices(
      numpy_normalize_weights(once), static_cast<std::size_t>(datasets.train->size));
  // Only the targeted 100 samples: past them the greedy interleaving can ask a component for more
  // samples than it has (upstream would raise IndexError there; we fail with a message).
  for (std::int64_t i = 0; i < 100; ++i) {
    const auto s = static_cast<std::size_t>(i);
    const GptDataset& component = indices.dataset_index[s] == 0 ? train_a : train_b;
    const auto tokens = datasets.train->sample(i);
    EXPECT_EQ(tokens, component.sample(indices.dataset_sample_index[s])) << "sample " << i;
  }
  EXPECT_GE(datasets.train->sample(0).front(), 1000);  // the heavier B comes first
  EXPECT_THROW(datasets.train->sample(datasets.train->size - 1), base::Error);
}

TEST(TrainDatasets, BlendWithASplitMissingInOneComponentFails) {
  ScratchDir dir;
  const std::string a = write_dataset(dir.file("A"), 60, 0);
  const std::string b = write_dataset(dir.file("B"), 2, 1000);  // "1,1,1" of 2: no test documents
  TrainDatasetsArgs args = args_for({"1", a, "1", b}, {3, 2, 1});
  args.split = "1,1,1";
  EXPECT_NE(error_of(args).find("weights"), std::string::npos) << error_of(args);
}

TEST(TrainDatasets, WeightedSplitPathGroups) {
  ScratchDir dir;
  const std::string a = write_dataset(dir.file("A"), 60, 0);
  const std::string b = write_dataset(dir.file("B"), 60, 1000);
  TrainDatasetsArgs args;
  args.train_weighted_split_paths = {"TRAIN: 1 0:0.5 " + a + ", 2 0:0.5 " + b};
  args.valid_weighted_split_paths = {"V1: 1 0.5:1 " + a, "V2: 1 0.5:0.75 " + b};
  args.num_samples = {100, 30, 3};
  args.seq_length = 8;
  std::vector<std::string> log;
  const auto datasets =
      build_train_valid_test_datasets(args, [&](const std::string& line) { log.push_back(line); });
  ASSERT_TRUE(datasets.train);
  EXPECT_EQ(datasets.train->name, "TRAIN");
  // A blended group uses the blend's counts; a single path the whole split's count.
  EXPECT_TRUE(exists(cache_file(a, "TRAIN", 34)));
  EXPECT_TRUE(exists(cache_file(b, "TRAIN", 67)));
  ASSERT_EQ(datasets.valid.size(), 2u);
  EXPECT_EQ(datasets.valid[0].name, "V1");
  EXPECT_EQ(datasets.valid[1].name, "V2");
  EXPECT_TRUE(exists(cache_file(a, "V1", 30)));
  EXPECT_TRUE(exists(cache_file(b, "V2", 30)));
  EXPECT_TRUE(datasets.test.empty());
  EXPECT_NE(
      std::find(log.begin(), log.end(), "     document indices in [30, 45) total of 15 documents"),
      log.end());
  for (std::int64_t i = 0; i < datasets.valid[1].size; ++i) {
    for (const std::int64_t token : datasets.valid[1].sample(i)) {
      EXPECT_GE(token, 1300);
      EXPECT_LT(token, 1450);
    }
  }
}

TEST(TrainDatasets, RejectsMixedOrMissingModes) {
  ScratchDir dir;
  const std::string a = write_dataset(dir.file("A"), 10, 0);
  TrainDatasetsArgs mixed = args_for({a}, {5, 5, 5});
  mixed.train_weighted_split_paths = {"T: 1 0:1 " + a};
  EXPECT_NE(error_of(mixed).find("mutually exclusive"), std::string::npos);

  TrainDatasetsArgs none = args_for({}, {5, 5, 5});
  EXPECT_NE(error_of(none).find("no training data"), std::string::npos);
  none.valid_weighted_split_paths = {"V: 1 0:1 " + a};
  EXPECT_NE(error_of(none).find("no training data"), std::string::npos);

  TrainDatasetsArgs two = args_for({}, {5, 5, 5});
  two.train_weighted_split_paths = {"T: 1 0:1 " + a, "U: 1 0:1 " + a};
  EXPECT_NE(error_of(two).find("only 1 dataset group"), std::string::npos);

  TrainDatasetsArgs split = args_for({}, {5, 5, 5});
  split.train_weighted_split_paths = {"T: 1 0:1 " + a};
  split.split = "1,1,1";
  EXPECT_NE(error_of(split).find("--split"), std::string::npos);

  TrainDatasetsArgs empty_range = args_for({}, {5, 5, 5});
  empty_range.train_weighted_split_paths = {"T: 1 0:0.01 " + a};  // round(0.1) = 0 documents
  EXPECT_NE(error_of(empty_range).find("selects no document"), std::string::npos);

  EXPECT_NE(error_of(args_for({dir.file("missing")}, {5, 5, 5})).find("does not exist"),
            std::string::npos);
}

}  // namespace
}  // namespace mds::data
