#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "data/dataset_split.h"
#include "io/npy.h"

namespace mds::data {

// Receives the lines upstream prints while building or loading the maps; the library never prints.
using LogFn = std::function<void(const std::string&)>;

// What _build_index_mappings is given (data.md §5.6).
struct IndexMapRequest {
  std::string name;         // "train" / "valid" / "test", or a mode-2 group name
  std::string data_prefix;  // the indexed dataset; the cache files go next to it
  DocumentRange documents;  // sequence indices of this split
  std::int64_t num_samples = 0;
  std::int64_t seq_length = 0;
  std::int64_t seed = 1234;
};

// The three arrays, built in memory.
struct IndexMappings {
  std::int64_t tokens_per_epoch = 0;
  std::int64_t num_epochs = 0;
  bool separate_last_epoch = false;
  std::int64_t shuffle_split = 0;        // the shuffle permutes [0, split) and [split, T) apart
  std::vector<std::int32_t> doc_idx;     // documents of every epoch, shuffled
  std::vector<std::int32_t> sample_idx;  // [T + 1, 2] row-major: (doc_idx position, token offset)
  // shuffle_idx is uint32 unless T >= 2^32 - 2, then int64 (as upstream); one of these is used.
  std::vector<std::uint32_t> shuffle_idx_u32;
  std::vector<std::int64_t> shuffle_idx_i64;

  std::int64_t num_samples() const { return static_cast<std::int64_t>(sample_idx.size() / 2) - 1; }
  bool shuffle_is_int64() const { return !shuffle_idx_i64.empty(); }
};

// Σ sizes over the documents (int64: a split can hold more than 2^31 tokens).
std::int64_t count_tokens(std::span<const std::int32_t> sizes, DocumentRange documents);
// The smallest e >= 1 with (e × tokens_per_epoch − 1) // seq_length >= num_samples. Fails when
// tokens_per_epoch is 0 (upstream loops forever).
std::int64_t count_epochs(std::int64_t tokens_per_epoch, std::int64_t seq_length,
                          std::int64_t num_samples);
// helpers.cpp build_sample_idx over all epochs: where each sample starts.
std::vector<std::int32_t> build_sample_idx(std::span<const std::int32_t> sizes,
                                           std::span<const std::int32_t> doc_idx,
                                           std::int64_t seq_length, std::int64_t num_epochs,
                                           std::int64_t tokens_per_epoch);

// Builds the maps exactly as upstream (same RandomState stream: doc_idx shuffle(s), then the
// shuffle_idx shuffle(s)). `sizes` are the whole dataset's. Fails with upstream's assertion text
// when the last epoch would need more samples than an epoch holds (tiny datasets).
IndexMappings build_index_mappings(std::span<const std::int32_t> sizes,
                                   const IndexMapRequest& request, const LogFn& log = {});

// "{prefix}_{name}_indexmap_{ns}ns_{sl}sl_{seed}s_{doc,sample,shuffle}_idx.npy".
struct IndexMapPaths {
  std::string doc_idx;
  std::string sample_idx;
  std::string shuffle_idx;
};
IndexMapPaths index_map_paths(const IndexMapRequest& request);

// Writes the three .npy files as np.save does, each atomically.
void save_index_mappings(const IndexMappings& mappings, const IndexMapPaths& paths);

// The maps as the dataset reads them: memory-mapped cache files.
struct LoadedIndexMappings {
  io::NpyArray doc_idx;
  io::NpyArray sample_idx;
  io::NpyArray shuffle_idx;
  std::int64_t num_epochs = 0;
  std::int64_t num_samples() const { return static_cast<std::int64_t>(sample_idx.shape()[0]) - 1; }
};
// Loads the three files and checks their shapes and dtypes against each other.
LoadedIndexMappings load_index_mappings(const IndexMapPaths& paths, std::int64_t num_epochs);

// _build_index_mappings: builds and saves the cache files unless all three exist, then loads them.
// Like upstream, existing files are reused without checking that they came from this document
// range (the range is not in the name); unlike upstream, their shapes and dtypes are checked.
LoadedIndexMappings build_or_load_index_mappings(std::span<const std::int32_t> sizes,
                                                 const IndexMapRequest& request,
                                                 const LogFn& log = {});

}  // namespace mds::data
