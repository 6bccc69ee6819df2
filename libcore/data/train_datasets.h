// The datasets a pretraining run draws from, built as upstream's
// megatron/data/gpt_dataset.py build_train_valid_test_datasets and build_dataset_group do
// (data.md §5.3–§5.6).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/blending.h"
#include "data/gpt_dataset.h"
#include "data/gpt_index_mappings.h"

namespace mds::data {

// Something a loader can draw samples from: a GptDataset or a blend of them. `sample` must be
// safe to call from another thread (the loader prefetches on one).
struct SampleSource {
  std::string name;  // "train" / "valid" / "test", or a mode-2 group name
  std::int64_t size = 0;
  std::function<std::vector<std::int64_t>(std::int64_t)> sample;
};
SampleSource make_sample_source(std::string name, std::shared_ptr<const GptDataset> dataset);
SampleSource make_sample_source(std::string name, std::shared_ptr<const BlendedDataset> dataset);

// The flags that choose the data (data.md §5.1). Mode 1: --data-path (one prefix, or weights and
// prefixes) with --split. Mode 2: --(train|valid|test)-weighted-split-paths groups
// "NAME: W1 S1:E1 PATH1, ..." (after any -path file has been read).
struct TrainDatasetsArgs {
  std::vector<std::string> data_path;
  std::optional<std::string> split;  // mode 1 only; unset means "969, 30, 1"
  std::vector<std::string> train_weighted_split_paths;
  std::vector<std::string> valid_weighted_split_paths;
  std::vector<std::string> test_weighted_split_paths;
  SplitCounts num_samples{};  // train_valid_test_num_samples()
  std::int64_t seq_length = 0;
  std::int64_t seed = 1234;
};

// The splits that exist. Mode 1 gives at most one valid and one test dataset, named "valid" and
// "test"; mode 2 one per group, named after it, each evaluated separately.
struct TrainValidTestDatasets {
  std::optional<SampleSource> train;
  std::vector<SampleSource> valid;
  std::vector<SampleSource> test;
};

// Opens the indexed datasets and builds (or loads the cached) index maps of every split. A split
// whose document range is empty has no dataset; in a blend, a component with an empty split fails
// (upstream asserts). `log` receives upstream's progress lines.
TrainValidTestDatasets build_train_valid_test_datasets(const TrainDatasetsArgs& args,
                                                       const LogFn& log = {});

}  // namespace mds::data
