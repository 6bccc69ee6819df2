#include "io/indexed_dataset.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <type_traits>

#include "base/error.h"
#include "io/index_codec.h"

namespace mds::io {

using base::fail;

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
    case DType::kDouble:
      return 8;
  }
  fail("invalid dtype code ", static_cast<int>(dtype));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    // Both are float64; the names keep codes 6 and 7 apart in messages.
    case DType::kFloat64:
      return "float64 (np.float, code 6)";
    case DType::kDouble:
      return "float64 (np.double, code 7)";
    case DType::kUInt16:
      return "uint16";
  }
  return "invalid dtype";
}

std::optional<DType> dtype_from_code(std::uint64_t code) {
  if (code < 1 || code > 8) return std::nullopt;
  return static_cast<DType>(code);
}

DType best_fitting_dtype(std::optional<std::int64_t> vocab_size) {
  // 65500, not 65536: upstream's threshold, kept so both pick the same dtype (and file bytes).
  return vocab_size && *vocab_size < 65500 ? DType::kUInt16 : DType::kInt32;
}

std::string_view dataset_impl_name(DatasetImpl impl) {
  switch (impl) {
    case DatasetImpl::kMmap:
      return "mmap";
    case DatasetImpl::kCached:
      return "cached";
    case DatasetImpl::kLazy:
      return "lazy";
  }
  return "invalid";
}

DatasetImpl parse_dataset_impl(std::string_view name) {
  if (name == "mmap") return DatasetImpl::kMmap;
  if (name == "cached") return DatasetImpl::kCached;
  if (name == "lazy") return DatasetImpl::kLazy;
  fail("invalid dataset implementation '", name, "' (choose from 'lazy', 'cached', 'mmap')");
}

std::string bin_path(const std::string& prefix) {
  return prefix + ".bin";
}
std::string idx_path(const std::string& prefix) {
  return prefix + ".idx";
}

std::optional<DatasetImpl> infer_dataset_impl(const std::string& prefix) {
  const std::string path = idx_path(prefix);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) base::fail_errno("cannot open " + path);
  std::array<char, 8> magic{};
  std::size_t have = 0;
  while (have < magic.size()) {
    const ssize_t n = ::read(fd, magic.data() + have, magic.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int code = errno;
      ::close(fd);
      errno = code;
      base::fail_errno("cannot read " + path);
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  ::close(fd);
  // Upstream compares only the first 8 bytes, so "MMIDIDX\0" followed by anything infers as mmap
  // (the full 9-byte magic is checked when the index is parsed).
  const std::string_view start(magic.data(), have);
  if (start == detail::kLegacyMagic) return DatasetImpl::kCached;
  if (start == detail::kMmapMagic.substr(0, 8)) return DatasetImpl::kMmap;
  return std::nullopt;
}

std::uint64_t DatasetIndex::num_tokens() const {
  std::uint64_t total = 0;
  for (const std::int32_t size : sizes) total += static_cast<std::uint64_t>(size);
  return total;
}

// ---------------------------------------------------------------------------------------------
// Reading

IndexedDataset::IndexedDataset(std::string prefix, DatasetIndex index, base::MappedFile bin)
    : prefix_(std::move(prefix)), index_(std::move(index)), bin_(std::move(bin)) {}

void require_dataset_files(const std::string& prefix) {
  for (const std::string& path : {idx_path(prefix), bin_path(prefix)}) {
    if (!base::file_exists(path)) {
      fail("dataset ", prefix, " does not exist: ", path,
           " is missing (give the path without .bin/.idx; both files must exist)");
    }
  }
}

IndexedDataset IndexedDataset::open(const std::string& prefix) {
  require_dataset_files(prefix);
  const base::MappedFile idx(idx_path(prefix));
  base::MappedFile bin(bin_path(prefix));
  DatasetIndex index = parse_index(idx.bytes(), idx.path(), bin.size());
  return IndexedDataset(prefix, std::move(index), std::move(bin));
}

namespace {

template <typename T>
void widen(const unsigned char* data, std::size_t count, std::int64_t* out) {
  for (std::size_t k = 0; k < count; ++k) {
    T value;
    std::memcpy(&value, data + k * sizeof(T), sizeof(T));
    out[k] = static_cast<std::int64_t>(value);
  }
}

}  // namespace

std::vector<std::int64_t> IndexedDataset::get(std::size_t i, std::size_t offset,
                                              std::optional<std::size_t> length) const {
  if (i >= num_sequences()) {
    fail(prefix_, ": sequence ", i, " is out of range (", num_sequences(), " sequences)");
  }
  const auto size = static_cast<std::size_t>(index_.sizes[i]);
  const std::size_t count = length.value_or(offset <= size ? size - offset : 0);
  if (offset > size || count > size - offset) {
    fail(prefix_, ": tokens [", offset, ", ", offset + count, ") are outside sequence ", i, " of ",
         size, " tokens");
  }
  const std::size_t itemsize = dtype_size(index_.dtype);
  const unsigned char* data =
      bin_.data() + static_cast<std::size_t>(index_.pointers[i]) + offset * itemsize;
  std::vector<std::int64_t> tokens(count);
  switch (index_.dtype) {
    case DType::kUInt8:
      widen<std::uint8_t>(data, count, tokens.data());
      break;
    case DType::kInt8:
      widen<std::int8_t>(data, count, tokens.data());
      break;
    case DType::kInt16:
      widen<std::int16_t>(data, count, tokens.data());
      break;
    case DType::kUInt16:
      widen<std::uint16_t>(data, count, tokens.data());
      break;
    case DType::kInt32:
      widen<std::int32_t>(data, count, tokens.data());
      break;
    case DType::kInt64:
      widen<std::int64_t>(data, count, tokens.data());
      break;
    case DType::kFloat64:
    case DType::kDouble:
      fail(prefix_, ": dtype ", dtype_name(index_.dtype), " holds no token ids");
  }
  return tokens;
}

// ---------------------------------------------------------------------------------------------
// Writing

IndexedDatasetBuilder::IndexedDatasetBuilder(std::string prefix, DType dtype, DatasetImpl impl)
    : prefix_(std::move(prefix)) {
  index_.impl = impl;
  // Upstream's legacy builder ignores the requested type and stores int32.
  index_.dtype = impl == DatasetImpl::kMmap ? dtype : DType::kInt32;
  index_.doc_idx.push_back(0);
  bin_ = std::make_unique<base::AtomicFile>(bin_path(prefix_));
}

// The AtomicFile's destructor removes the temporary .bin when finalize() never ran.
IndexedDatasetBuilder::~IndexedDatasetBuilder() = default;

namespace {

// Converts tokens to T into `out`; returns false (after converting everything, so the loop stays
// branch-free and vectorizes) when some token does not fit T.
template <typename T>
bool convert_tokens(std::span<const std::int32_t> tokens, char* out) {
  bool fits = true;
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    const std::int32_t token = tokens[k];
    if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(std::int32_t)) {
      fits &= token >= std::numeric_limits<T>::min() && token <= std::numeric_limits<T>::max();
    }
    const T value = static_cast<T>(token);
    std::memcpy(out + k * sizeof(T), &value, sizeof(T));
  }
  return fits;
}

template <typename T>
[[noreturn]] void fail_out_of_range(std::span<const std::int32_t> tokens, DType dtype) {
  for (const std::int32_t token : tokens) {
    if (token < std::numeric_limits<T>::min() || token > std::numeric_limits<T>::max()) {
      fail("token ", token, " does not fit dtype ", dtype_name(dtype), " (range ",
           static_cast<std::int64_t>(std::numeric_limits<T>::min()), "..",
           static_cast<std::int64_t>(std::numeric_limits<T>::max()),
           "); use a wider dtype (int32 when the vocabulary has 65500 or more tokens)");
    }
  }
  fail("internal error: no out-of-range token found");
}

}  // namespace

void IndexedDatasetBuilder::add_item(std::span<const std::int32_t> tokens) {
  if (finalized_) fail(prefix_, ": add_item after finalize");
  if (tokens.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    fail(prefix_, ": a sequence of ", tokens.size(), " tokens is longer than 2^31-1");
  }
  const std::size_t count = tokens.size();
  if (count > 0) {
    const std::size_t bytes = count * dtype_size(index_.dtype);
    if (index_.dtype == DType::kInt32) {
      // Hot path of preprocess with large vocabularies: the tokens already have the file's layout.
      bin_->write(tokens.data(), bytes);
    } else {
      if (scratch_.size() < bytes) scratch_.resize(bytes);
      char* out = scratch_.data();
      bool fits = true;
      switch (index_.dtype) {
        case DType::kUInt16:  // the usual GPT-2 case, hot path of preprocess
          fits = convert_tokens<std::uint16_t>(tokens, out);
          if (!fits) fail_out_of_range<std::uint16_t>(tokens, index_.dtype);
          break;
        case DType::kUInt8:
          fits = convert_tokens<std::uint8_t>(tokens, out);
          if (!fits) fail_out_of_range<std::uint8_t>(tokens, index_.dtype);
          break;
        case DType::kInt8:
          fits = convert_tokens<std::int8_t>(tokens, out);
          if (!fits) fail_out_of_range<std::int8_t>(tokens, index_.dtype);
          break;
        case DType::kInt16:
          fits = convert_tokens<std::int16_t>(tokens, out);
          if (!fits) fail_out_of_range<std::int16_t>(tokens, index_.dtype);
          break;
        case DType::kInt64:
          convert_tokens<std::int64_t>(tokens, out);
          break;
        case DType::kFloat64:
        case DType::kDouble:
          convert_tokens<double>(tokens, out);
          break;
        case DType::kInt32:
          break;
      }
      bin_->write(out, bytes);
    }
  }
  index_.sizes.push_back(static_cast<std::int32_t>(count));
  tokens_ += count;
}

void IndexedDatasetBuilder::end_document() {
  if (finalized_) fail(prefix_, ": end_document after finalize");
  index_.doc_idx.push_back(static_cast<std::int64_t>(index_.sizes.size()));
}

void IndexedDatasetBuilder::append_index(const DatasetIndex& index, const std::string& source) {
  if (finalized_) fail(prefix_, ": append after finalize");
  if (index.dtype != index_.dtype) {
    fail("dataset ", source, " has dtype ", dtype_name(index.dtype), " but ", prefix_,
         " is being written as ", dtype_name(index_.dtype),
         " (datasets are concatenated byte for byte; no conversion is done)");
  }
  // Like upstream's merge_file_: the input's leading 0 is dropped and its document starts are
  // shifted by the sequences already present.
  const auto base = static_cast<std::int64_t>(index_.sizes.size());
  index_.sizes.insert(index_.sizes.end(), index.sizes.begin(), index.sizes.end());
  index_.doc_idx.reserve(index_.doc_idx.size() + index.doc_idx.size());
  for (std::size_t k = 1; k < index.doc_idx.size(); ++k) {
    index_.doc_idx.push_back(index.doc_idx[k] + base);
  }
  tokens_ += index.num_tokens();
}

void IndexedDatasetBuilder::append_dataset(const IndexedDataset& dataset) {
  append_index(dataset.index(), dataset.prefix());
  const std::string_view bytes = dataset.bin_bytes();
  if (!bytes.empty()) bin_->write(bytes.data(), bytes.size());
}

void IndexedDatasetBuilder::append_raw(const DatasetIndex& index, int bin_fd,
                                       const std::string& bin_name) {
  append_index(index, bin_name);
  if (index.bin_bytes() > 0) bin_->append_from_fd(bin_fd, 0, index.bin_bytes(), bin_name);
}

void IndexedDatasetBuilder::finalize() {
  if (finalized_) fail(prefix_, ": finalize called twice");
  const std::string final_bin = bin_path(prefix_);
  base::AtomicFile idx(idx_path(prefix_));
  detail::write_index(index_, [&](const void* data, std::size_t size) { idx.write(data, size); });
  // Both temporaries are complete before any final name changes. The stale .idx goes first, then
  // .bin, then .idx: a crash at any point leaves either the old pair, or a lone .bin that no reader
  // accepts, never a new .bin paired with an old .idx that would describe it wrongly.
  base::remove_if_exists(idx_path(prefix_));
  bin_->commit();
  try {
    idx.commit();
  } catch (...) {
    ::unlink(final_bin.c_str());  // best effort: a .bin without its .idx is useless
    throw;
  }
  finalized_ = true;
}

}  // namespace mds::io
