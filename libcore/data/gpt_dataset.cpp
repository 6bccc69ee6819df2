#include "data/gpt_dataset.h"

#include <algorithm>
#include <utility>

#include "base/error.h"

namespace mds::data {

SplitCounts train_valid_test_num_samples(const SampleCountArgs& args) {
  if (args.global_batch_size <= 0) base::fail("--global-batch-size must be positive");
  if (args.eval_interval <= 0) base::fail("--eval-interval must be positive");
  const std::int64_t train_iters = args.train_iters;
  const std::int64_t train_samples =
      args.train_samples ? *args.train_samples : train_iters * args.global_batch_size;
  // Every evaluation draws eval_iters batches from one persistent iterator; one more than the
  // number of intervals because evaluation also runs after the last iteration.
  // Python's floor division: train_iters is negative when --train-samples ends inside the ramp-up.
  const std::int64_t intervals = train_iters >= 0 ? train_iters / args.eval_interval
                                                  : -((-train_iters - 1) / args.eval_interval) - 1;
  const std::int64_t valid_iters = (intervals + 1) * args.eval_iters;
  return {train_samples, valid_iters * args.global_batch_size,
          args.eval_iters * args.global_batch_size};
}

GptDataset GptDataset::create(std::shared_ptr<const io::IndexedDataset> data,
                              const IndexMapRequest& request, const LogFn& log) {
  LoadedIndexMappings maps = build_or_load_index_mappings(data->index().sizes, request, log);
  return GptDataset(std::move(data), std::move(maps));
}

GptDataset::GptDataset(std::shared_ptr<const io::IndexedDataset> data, LoadedIndexMappings maps)
    : data_(std::move(data)), maps_(std::move(maps)) {}

std::int64_t GptDataset::document_at(std::int64_t position) const {
  if (position < 0 || static_cast<std::uint64_t>(position) >= maps_.doc_idx.size()) {
    base::fail(maps_.sample_idx.path(), ": position ", position, " is outside doc_idx (",
               maps_.doc_idx.size(), " entries)");
  }
  const std::int64_t document = maps_.doc_idx.at(static_cast<std::uint64_t>(position));
  if (document < 0 || static_cast<std::uint64_t>(document) >= data_->num_sequences()) {
    base::fail(maps_.doc_idx.path(), ": sequence ", document, " is outside ", data_->prefix(), " (",
               data_->num_sequences(), " sequences); the cache is stale");
  }
  return document;
}

std::int64_t GptDataset::document_size(std::int64_t document) const {
  return data_->index().sizes[static_cast<std::size_t>(document)];
}

std::vector<std::int64_t> GptDataset::sample(std::int64_t i) const {
  if (i < 0 || i >= size()) base::fail("sample ", i, " is outside the dataset of ", size());
  const std::int64_t j = maps_.shuffle_idx.at(static_cast<std::uint64_t>(i));
  if (j < 0 || j >= size()) {
    base::fail(maps_.shuffle_idx.path(), ": entry ", i, " = ", j, " is not a sample index");
  }
  const auto row = static_cast<std::uint64_t>(2 * j);
  const std::int64_t first = maps_.sample_idx.at(row);
  const std::int64_t first_offset = maps_.sample_idx.at(row + 1);
  const std::int64_t last = maps_.sample_idx.at(row + 2);
  const std::int64_t last_offset = maps_.sample_idx.at(row + 3);
  const std::int64_t first_doc = document_at(first);
  const std::int64_t last_doc = document_at(last);
  if (first > last || first_offset < 0 ||
      first_offset >= std::max<std::int64_t>(document_size(first_doc), 1) || last_offset < 0 ||
      last_offset >= document_size(last_doc) || (first == last && last_offset < first_offset)) {
    base::fail(maps_.sample_idx.path(), ": rows ", j, " and ", j + 1,
               " do not describe a sample of ", data_->prefix(), "; the cache is stale");
  }
  const auto get = [&](std::int64_t document, std::int64_t offset, std::int64_t length) {
    return data_->get(static_cast<std::size_t>(document), static_cast<std::size_t>(offset),
                      static_cast<std::size_t>(length));
  };
  // Row j+1 is inclusive: its token is both the last of this sample and the first of the next.
  if (first == last) return get(first_doc, first_offset, last_offset - first_offset + 1);
  std::vector<std::int64_t> tokens =
      get(first_doc, first_offset, document_size(first_doc) - first_offset);
  for (std::int64_t position = first + 1; position < last; ++position) {
    const std::int64_t document = document_at(position);
    const auto middle = get(document, 0, document_size(document));
    tokens.insert(tokens.end(), middle.begin(), middle.end());
  }
  const auto tail = get(last_doc, 0, last_offset + 1);
  tokens.insert(tokens.end(), tail.begin(), tail.end());
  return tokens;
}

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<const GptDataset>> datasets,
                               std::span<const double> weights)
    : datasets_(std::move(datasets)) {
  if (datasets_.size() != weights.size()) {
    base::fail("blended dataset: ", datasets_.size(), " datasets but ", weights.size(),
               " weights (a component may have had an empty split)");
  }
  std::int64_t size = 0;
  for (const auto& dataset : datasets_) size += dataset->size();
  indices_ =
      build_blending_indices(numpy_normalize_weights(weights), static_cast<std::size_t>(size));
}

std::vector<std::int64_t> BlendedDataset::sample(std::int64_t i) const {
  if (i < 0 || i >= size()) base::fail("blended sample ", i, " is outside the dataset of ", size());
  const auto index = static_cast<std::size_t>(i);
  const GptDataset& dataset = *datasets_[indices_.dataset_index[index]];
  const std::int64_t inner = indices_.dataset_sample_index[index];
  if (inner >= dataset.size()) {
    base::fail("blended sample ", i, " needs sample ", inner, " of dataset ",
               int(indices_.dataset_index[index]), ", which has only ", dataset.size());
  }
  return dataset.sample(inner);
}

}  // namespace mds::data
