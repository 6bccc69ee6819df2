#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/atomic_file.h"
#include "base/mapped_file.h"

namespace mds::io {

// Element type codes of Megatron's indexed datasets (data.md §1.2).
enum class DType : std::uint8_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,  // np.float (Python float)
  kDouble = 7,   // np.double; also float64 here (NVIDIA Megatron-LM reads it as float32)
  kUInt16 = 8,
};
std::size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_code(std::uint64_t code);
// uint16 when vocab_size < 65500, else int32 (upstream's best_fitting_dtype).
DType best_fitting_dtype(std::optional<std::int64_t> vocab_size);

// On-disk formats: MMIDIDX ("mmap") and the legacy TNTIDX written by "lazy" and "cached".
enum class DatasetImpl { kMmap, kCached, kLazy };
std::string_view dataset_impl_name(DatasetImpl impl);
// Parses "mmap" | "cached" | "lazy"; fails with the list of choices otherwise.
DatasetImpl parse_dataset_impl(std::string_view name);
// What --data-impl infer sees in "<prefix>.idx": kMmap, kCached, or nullopt for an unknown magic.
// Fails with a clear message if the file cannot be read.
std::optional<DatasetImpl> infer_dataset_impl(const std::string& prefix);

std::string bin_path(const std::string& prefix);
std::string idx_path(const std::string& prefix);
// Fails with "dataset <prefix> does not exist: <file> is missing ..." unless both files exist.
void require_dataset_files(const std::string& prefix);

// The index of a dataset, parsed and checked against the size of its .bin.
struct DatasetIndex {
  DatasetImpl impl = DatasetImpl::kMmap;  // kCached for any TNTIDX file
  DType dtype = DType::kUInt16;
  std::vector<std::int32_t> sizes;     // tokens per sequence
  std::vector<std::int64_t> pointers;  // byte offset of each sequence in .bin
  std::vector<std::int64_t> doc_idx;   // sequence index where each document starts, plus the end

  std::uint64_t num_tokens() const;
  std::uint64_t bin_bytes() const { return num_tokens() * dtype_size(dtype); }
};

// Parses an .idx image (either format). `name` is used in messages; `bin_size`, when given, is
// checked against what the index describes. Every malformed input fails with a base::Error that
// names `name` and the field at fault; nothing is trusted (counts, offsets, dtype codes).
DatasetIndex parse_index(std::string_view bytes, const std::string& name,
                         std::optional<std::uint64_t> bin_size);

// Serializes an index in its format (sizes/doc_idx as given; mmap pointers recomputed).
std::string serialize_index(const DatasetIndex& index);

// A dataset opened for reading: "<prefix>.idx" parsed, "<prefix>.bin" mapped.
class IndexedDataset {
 public:
  // Fails with "dataset <prefix> does not exist: ..." when a file is missing.
  static IndexedDataset open(const std::string& prefix);

  const DatasetIndex& index() const { return index_; }
  const std::string& prefix() const { return prefix_; }
  std::size_t num_sequences() const { return index_.sizes.size(); }
  std::size_t num_documents() const {
    return index_.doc_idx.empty() ? 0 : index_.doc_idx.size() - 1;
  }
  // Tokens [offset, offset + length) of sequence i, widened to int64.
  std::vector<std::int64_t> get(std::size_t i, std::size_t offset = 0,
                                std::optional<std::size_t> length = std::nullopt) const;
  // The whole mapped .bin.
  std::string_view bin_bytes() const { return bin_.bytes(); }

 private:
  IndexedDataset(std::string prefix, DatasetIndex index, base::MappedFile bin);
  std::string prefix_;
  DatasetIndex index_;
  base::MappedFile bin_;
};

// Writes "<prefix>.bin" and "<prefix>.idx" atomically (temporary names until finalize()).
// Legacy formats (kCached/kLazy) always store int32, as upstream's builder does.
class IndexedDatasetBuilder {
 public:
  IndexedDatasetBuilder(std::string prefix, DType dtype, DatasetImpl impl);
  ~IndexedDatasetBuilder();
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  // Appends one sequence. Fails if a token does not fit the dtype.
  void add_item(std::span<const std::int32_t> tokens);
  void end_document();
  // Appends a whole dataset of the same dtype: its .bin bytes are copied, its index appended.
  void append_dataset(const IndexedDataset& dataset);
  // Same for a parsed index whose .bin is open as `bin_fd` (checked against the index by the
  // caller): the bytes are copied by the kernel, never through this process's memory.
  void append_raw(const DatasetIndex& index, int bin_fd, const std::string& bin_name);
  // Writes the index, then renames .bin and .idx into place (any stale .idx is removed first, so a
  // crash in between never pairs a new .bin with an old .idx).
  void finalize();

  DType dtype() const { return index_.dtype; }
  std::size_t num_sequences() const { return index_.sizes.size(); }
  std::size_t num_documents() const { return index_.doc_idx.size() - 1; }
  std::uint64_t num_tokens() const { return tokens_; }

 private:
  void append_index(const DatasetIndex& index, const std::string& source);

  std::string prefix_;
  DatasetIndex index_;  // pointers stay empty: they are recomputed from sizes when written
  std::unique_ptr<base::AtomicFile> bin_;
  std::vector<char> scratch_;
  std::uint64_t tokens_ = 0;
  bool finalized_ = false;
};

}  // namespace mds::io
