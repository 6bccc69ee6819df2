#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "data/blending.h"
#include "data/gpt_index_mappings.h"
#include "io/indexed_dataset.h"

namespace mds::data {

// Train/valid/test sample targets (data.md §5.2). `train_iters` is the run's iteration count as
// upstream's update_train_iters has resolved it before the datasets are built: --train-iters, or
// the iterations --train-samples lasts (counted through the batch-size ramp-up when there is one,
// else train_samples // global_batch_size). The validation count follows it.
struct SampleCountArgs {
  std::int64_t train_iters = 0;
  std::optional<std::int64_t> train_samples;  // --train-samples; else train_iters × global batch
  std::int64_t global_batch_size = 0;
  std::int64_t eval_interval = 1000;
  std::int64_t eval_iters = 100;
};
SplitCounts train_valid_test_num_samples(const SampleCountArgs& args);

// Upstream's GPTDataset: fixed-length samples of seq_length + 1 tokens over a document range,
// visited in the shuffled order of its index maps.
class GptDataset {
 public:
  // Builds or loads the index maps of `request` (data_prefix should be data->prefix()).
  static GptDataset create(std::shared_ptr<const io::IndexedDataset> data,
                           const IndexMapRequest& request, const LogFn& log = {});
  GptDataset(std::shared_ptr<const io::IndexedDataset> data, LoadedIndexMappings maps);

  // T: all samples of all epochs, usually more than requested.
  std::int64_t size() const { return maps_.num_samples(); }
  // Sample i (i < size()): tokens crossing document boundaries as needed.
  std::vector<std::int64_t> sample(std::int64_t i) const;
  const LoadedIndexMappings& maps() const { return maps_; }

 private:
  std::int64_t document_at(std::int64_t position) const;
  std::int64_t document_size(std::int64_t document) const;

  std::shared_ptr<const io::IndexedDataset> data_;
  LoadedIndexMappings maps_;
};

// Upstream's BlendableDataset: several datasets interleaved in proportion to their weights.
class BlendedDataset {
 public:
  // `weights` are normalized again here with numpy's sum, as upstream does.
  BlendedDataset(std::vector<std::shared_ptr<const GptDataset>> datasets,
                 std::span<const double> weights);

  std::int64_t size() const { return static_cast<std::int64_t>(indices_.dataset_index.size()); }
  std::vector<std::int64_t> sample(std::int64_t i) const;
  const BlendingIndices& indices() const { return indices_; }

 private:
  std::vector<std::shared_ptr<const GptDataset>> datasets_;
  BlendingIndices indices_;
};

}  // namespace mds::data
