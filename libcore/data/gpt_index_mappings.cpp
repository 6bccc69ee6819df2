#include "data/gpt_index_mappings.h"

#include <limits>

#include "base/error.h"
#include "base/mapped_file.h"
#include "data/numpy_random.h"

namespace mds::data {
namespace {

// The last epoch is shuffled apart when it holds less than this share of an epoch's samples.
constexpr double kCutoffLastEpoch = 0.95;
constexpr const char* kCutoffPercentText = "95.0";  // Python's str(0.95 * 100)
constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
// At or above this many samples upstream stores shuffle_idx as int64 (np.iinfo(np.uint32).max - 1).
constexpr std::int64_t kShuffleInt64From = std::int64_t{0xFFFFFFFF} - 1;

void emit(const LogFn& log, const std::string& line) {
  if (log) log(line);
}

// _build_doc_idx for one run of epochs: the documents repeated epoch-major, then shuffled.
void append_shuffled_epochs(std::vector<std::int32_t>& doc_idx, DocumentRange documents,
                            std::int64_t epochs, RandomState& rng) {
  const std::size_t start = doc_idx.size();
  for (std::int64_t e = 0; e < epochs; ++e) {
    for (std::int64_t d = documents.begin; d < documents.end; ++d) {
      doc_idx.push_back(static_cast<std::int32_t>(d));
    }
  }
  rng.shuffle(std::span(doc_idx).subspan(start));
}

// _build_shuffle_idx: arange(0, split) shuffled, then arange(split, total) shuffled.
template <typename T>
std::vector<T> build_shuffle_idx(std::int64_t split, std::int64_t total, RandomState& rng) {
  std::vector<T> shuffle_idx(static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < total; ++i)
    shuffle_idx[static_cast<std::size_t>(i)] = static_cast<T>(i);
  const auto all = std::span(shuffle_idx);
  rng.shuffle(all.first(static_cast<std::size_t>(split)));
  if (split != total) rng.shuffle(all.subspan(static_cast<std::size_t>(split)));
  return shuffle_idx;
}

void check_request(std::span<const std::int32_t> sizes, const IndexMapRequest& request) {
  const auto& documents = request.documents;
  if (documents.begin < 0 || documents.end > static_cast<std::int64_t>(sizes.size()) ||
      documents.empty()) {
    base::fail(request.name, " index map for ", request.data_prefix, ": document range [",
               documents.begin, ", ", documents.end, ") is empty or outside the dataset's ",
               sizes.size(), " sequences");
  }
  if (documents.end > kInt32Max) {
    base::fail(request.name, " index map for ", request.data_prefix,
               ": document indices above 2^31 - 1 do not fit upstream's int32 doc_idx");
  }
  if (request.seq_length <= 0)
    base::fail("--seq-length must be positive, got ", request.seq_length);
  if (request.num_samples < 0) base::fail("number of samples must not be negative");
  // numpy's RandomState accepts exactly these integer seeds.
  if (request.seed < 0 || request.seed > std::int64_t{0xFFFFFFFF}) {
    base::fail("--seed ", request.seed, ": the dataset seed must be between 0 and 2**32 - 1");
  }
}

void check_1d(const io::NpyArray& array, const char* what) {
  if (array.shape().size() != 1) base::fail(array.path(), ": ", what, " must be 1-D");
}

}  // namespace

std::int64_t count_tokens(std::span<const std::int32_t> sizes, DocumentRange documents) {
  std::int64_t tokens = 0;
  for (std::int64_t d = documents.begin; d < documents.end; ++d) {
    tokens += sizes[static_cast<std::size_t>(d)];
  }
  return tokens;
}

std::int64_t count_epochs(std::int64_t tokens_per_epoch, std::int64_t seq_length,
                          std::int64_t num_samples) {
  if (tokens_per_epoch <= 0) {
    base::fail("the documents of this split hold no tokens, so no number of epochs can give ",
               num_samples, " samples (upstream loops forever here)");
  }
  std::int64_t epochs = 0;
  std::int64_t total = 0;
  do {
    ++epochs;
    total += tokens_per_epoch;
  } while ((total - 1) / seq_length < num_samples);
  return epochs;
}

std::vector<std::int32_t> build_sample_idx(std::span<const std::int32_t> sizes,
                                           std::span<const std::int32_t> doc_idx,
                                           std::int64_t seq_length, std::int64_t num_epochs,
                                           std::int64_t tokens_per_epoch) {
  const std::int64_t num_samples = (num_epochs * tokens_per_epoch - 1) / seq_length;
  std::vector<std::int32_t> sample_idx(static_cast<std::size_t>(2 * (num_samples + 1)));
  std::int64_t doc_idx_index = 0;
  std::int64_t doc_offset = 0;
  sample_idx[0] = 0;
  sample_idx[1] = 0;
  for (std::int64_t s = 1; s <= num_samples; ++s) {
    // Each sample takes seq_length + 1 tokens; its last token is also the next sample's first.
    std::int64_t remaining = seq_length + 1;
    while (remaining != 0) {
      if (doc_idx_index >= static_cast<std::int64_t>(doc_idx.size())) {
        base::fail("build_sample_idx: doc_idx holds fewer tokens than ", num_epochs, " epochs of ",
                   tokens_per_epoch);
      }
      const std::int64_t doc_length =
          sizes[static_cast<std::size_t>(doc_idx[static_cast<std::size_t>(doc_idx_index)])] -
          doc_offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        doc_offset += remaining + doc_length - 1;  // stop inside this document
        remaining = 0;
      } else {
        ++doc_idx_index;
        doc_offset = 0;
      }
    }
    sample_idx[static_cast<std::size_t>(2 * s)] = static_cast<std::int32_t>(doc_idx_index);
    sample_idx[static_cast<std::size_t>(2 * s + 1)] = static_cast<std::int32_t>(doc_offset);
  }
  return sample_idx;
}

IndexMappings build_index_mappings(std::span<const std::int32_t> sizes,
                                   const IndexMapRequest& request, const LogFn& log) {
  check_request(sizes, request);
  IndexMappings maps;
  maps.tokens_per_epoch = count_tokens(sizes, request.documents);
  maps.num_epochs = count_epochs(maps.tokens_per_epoch, request.seq_length, request.num_samples);
  const std::int64_t total_samples =
      (maps.num_epochs * maps.tokens_per_epoch - 1) / request.seq_length;
  if (maps.num_epochs * request.documents.size() > kInt32Max) {
    base::fail(request.name, " index map for ", request.data_prefix, ": ", maps.num_epochs,
               " epochs of ", request.documents.size(),
               " documents exceed upstream's int32 sample_idx");
  }
  RandomState rng(static_cast<std::uint32_t>(request.seed));

  std::int64_t from_epochs_minus_one = 0;
  if (maps.num_epochs == 1) {
    maps.separate_last_epoch = false;
    emit(log, " > only one epoch required, setting separate_last_epoch to False");
  } else {
    from_epochs_minus_one =
        ((maps.num_epochs - 1) * maps.tokens_per_epoch - 1) / request.seq_length;
    const std::int64_t last_epoch_samples = request.num_samples - from_epochs_minus_one;
    if (last_epoch_samples < 0) {
      base::fail("AssertionError: last epoch number of samples ", last_epoch_samples,
                 " should be non-negative.");
    }
    const std::int64_t per_epoch = (maps.tokens_per_epoch - 1) / request.seq_length;
    if (last_epoch_samples > per_epoch) {
      base::fail("AssertionError: last epoch number of samples ", last_epoch_samples,
                 " exceeded max value ", per_epoch, ".");
    }
    // int() of the double product truncates, as C's cast does for positive values.
    maps.separate_last_epoch =
        last_epoch_samples <
        static_cast<std::int64_t>(kCutoffLastEpoch * static_cast<double>(per_epoch));
    emit(log, base::cat(" > last epoch number of samples (", last_epoch_samples, ") is ",
                        maps.separate_last_epoch ? "smaller" : "larger", " than ",
                        kCutoffPercentText, "% of number of samples per epoch (", per_epoch,
                        "), setting separate_last_epoch to ",
                        maps.separate_last_epoch ? "True" : "False"));
  }

  maps.doc_idx.reserve(static_cast<std::size_t>(maps.num_epochs * request.documents.size()));
  if (maps.separate_last_epoch) {
    append_shuffled_epochs(maps.doc_idx, request.documents, maps.num_epochs - 1, rng);
    append_shuffled_epochs(maps.doc_idx, request.documents, 1, rng);
  } else {
    append_shuffled_epochs(maps.doc_idx, request.documents, maps.num_epochs, rng);
  }

  // Draws nothing from rng.
  maps.sample_idx = build_sample_idx(sizes, maps.doc_idx, request.seq_length, maps.num_epochs,
                                     maps.tokens_per_epoch);

  maps.shuffle_split = maps.separate_last_epoch ? from_epochs_minus_one : total_samples;
  emit(log, base::cat(" > building shuffle index with split [0, ", maps.shuffle_split, ") and [",
                      maps.shuffle_split, ", ", total_samples, ") ..."));
  if (total_samples >= kShuffleInt64From) {
    maps.shuffle_idx_i64 = build_shuffle_idx<std::int64_t>(maps.shuffle_split, total_samples, rng);
  } else {
    maps.shuffle_idx_u32 = build_shuffle_idx<std::uint32_t>(maps.shuffle_split, total_samples, rng);
  }
  return maps;
}

IndexMapPaths index_map_paths(const IndexMapRequest& request) {
  const std::string stem =
      base::cat(request.data_prefix, "_", request.name, "_indexmap_", request.num_samples, "ns_",
                request.seq_length, "sl_", request.seed, "s");
  return {stem + "_doc_idx.npy", stem + "_sample_idx.npy", stem + "_shuffle_idx.npy"};
}

void save_index_mappings(const IndexMappings& mappings, const IndexMapPaths& paths) {
  const std::uint64_t doc_shape[] = {mappings.doc_idx.size()};
  io::save_npy(paths.doc_idx, std::span<const std::int32_t>(mappings.doc_idx), doc_shape);
  const std::uint64_t sample_shape[] = {mappings.sample_idx.size() / 2, 2};
  io::save_npy(paths.sample_idx, std::span<const std::int32_t>(mappings.sample_idx), sample_shape);
  if (mappings.shuffle_is_int64()) {
    const std::uint64_t shape[] = {mappings.shuffle_idx_i64.size()};
    io::save_npy(paths.shuffle_idx, std::span<const std::int64_t>(mappings.shuffle_idx_i64), shape);
  } else {
    const std::uint64_t shape[] = {mappings.shuffle_idx_u32.size()};
    io::save_npy(paths.shuffle_idx, std::span<const std::uint32_t>(mappings.shuffle_idx_u32),
                 shape);
  }
}

LoadedIndexMappings load_index_mappings(const IndexMapPaths& paths, std::int64_t num_epochs) {
  LoadedIndexMappings maps{io::NpyArray::load(paths.doc_idx), io::NpyArray::load(paths.sample_idx),
                           io::NpyArray::load(paths.shuffle_idx), num_epochs};
  // Upstream trusts these files blindly; a stale or foreign file should fail here, not index out of
  // bounds later. Element values are checked as samples are read.
  check_1d(maps.doc_idx, "doc_idx");
  if (maps.doc_idx.dtype() != io::NpyDType::kInt32) {
    base::fail(paths.doc_idx, ": doc_idx dtype must be '<i4'");
  }
  const auto& sample_shape = maps.sample_idx.shape();
  if (sample_shape.size() != 2 || sample_shape[1] != 2 || sample_shape[0] == 0 ||
      maps.sample_idx.dtype() != io::NpyDType::kInt32) {
    base::fail(paths.sample_idx, ": sample_idx must be '<i4' of shape (T + 1, 2)");
  }
  check_1d(maps.shuffle_idx, "shuffle_idx");
  if (maps.shuffle_idx.dtype() == io::NpyDType::kInt32) {
    base::fail(paths.shuffle_idx, ": shuffle_idx dtype must be '<u4' or '<i8'");
  }
  if (maps.shuffle_idx.shape()[0] != sample_shape[0] - 1) {
    base::fail(paths.shuffle_idx, ": shuffle_idx has ", maps.shuffle_idx.shape()[0],
               " entries but ", paths.sample_idx, " describes ", sample_shape[0] - 1,
               " samples; the cache files are inconsistent (delete them to rebuild)");
  }
  return maps;
}

LoadedIndexMappings build_or_load_index_mappings(std::span<const std::int32_t> sizes,
                                                 const IndexMapRequest& request, const LogFn& log) {
  check_request(sizes, request);
  const IndexMapPaths paths = index_map_paths(request);
  const std::int64_t tokens = count_tokens(sizes, request.documents);
  const std::int64_t epochs = count_epochs(tokens, request.seq_length, request.num_samples);
  if (!base::file_exists(paths.doc_idx) || !base::file_exists(paths.sample_idx) ||
      !base::file_exists(paths.shuffle_idx)) {
    emit(log, " > WARNING: could not find index map files, building the indices on rank 0 ...");
    save_index_mappings(build_index_mappings(sizes, request, log), paths);
  }
  emit(log, " > loading doc-idx mapping from " + paths.doc_idx);
  emit(log, " > loading sample-idx mapping from " + paths.sample_idx);
  emit(log, " > loading shuffle-idx mapping from " + paths.shuffle_idx);
  LoadedIndexMappings maps = load_index_mappings(paths, epochs);
  emit(log, base::cat("    total number of samples: ", maps.sample_idx.shape()[0]));
  emit(log, base::cat("    total number of epochs: ", epochs));
  return maps;
}

}  // namespace mds::data
