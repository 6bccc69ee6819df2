// Reading and writing the two .idx layouts. Every reader check exists because a real file failed it
// somewhere: a copy cut short, a .bin from another run, a hand-written index. Upstream trusts the
// header and lets numpy fail later (or not at all); we say which file and which field is wrong.
#include "io/index_codec.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <utility>

#include "base/error.h"

namespace mds::io {

static_assert(std::endian::native == std::endian::little,
              "index files are little-endian and are read and written with memcpy");

namespace {

using base::fail;
using detail::kLegacyHeaderSize;
using detail::kLegacyMagic;
using detail::kMmapHeaderSize;
using detail::kMmapMagic;

// Arrays in .idx files start at odd offsets (34 + 4N ...), so values are copied, never cast.
template <typename T>
T load(std::string_view bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <typename T>
std::vector<T> load_array(std::string_view bytes, std::size_t offset, std::size_t count) {
  std::vector<T> values(count);
  if (count > 0) std::memcpy(values.data(), bytes.data() + offset, count * sizeof(T));
  return values;
}

// header + Σ count·width, or nullopt when it does not fit in 64 bits (a hostile header).
std::optional<std::uint64_t> described_size(
    std::uint64_t header, std::initializer_list<std::pair<std::uint64_t, std::uint64_t>> arrays) {
  std::uint64_t total = header;
  for (const auto& [count, width] : arrays) {
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, width, &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      return std::nullopt;
  }
  return total;
}

void require_length(const std::string& name, std::size_t have, std::optional<std::uint64_t> need,
                    const std::string& what) {
  if (need && *need <= have) return;
  fail(name, ": truncated: the header declares ", what, ", which needs ",
       need ? base::cat(*need, " bytes") : std::string("more than 2^64 bytes"),
       ", but the file has ", have, " bytes");
}

DType read_dtype(const std::string& name, std::uint64_t code) {
  const std::optional<DType> dtype = dtype_from_code(code);
  if (!dtype) fail(name, ": unknown dtype code ", code, " (known codes are 1 to 8)");
  return *dtype;
}

void check_version(const std::string& name, std::uint64_t version) {
  if (version != 1) fail(name, ": unsupported index version ", version, " (only version 1 exists)");
}

void check_doc_idx(const std::string& name, const std::vector<std::int64_t>& doc_idx,
                   std::uint64_t sequences) {
  if (doc_idx.empty()) fail(name, ": doc_idx is empty (it must hold at least the leading 0)");
  if (doc_idx[0] != 0) fail(name, ": doc_idx[0] = ", doc_idx[0], ", expected 0");
  for (std::size_t i = 1; i < doc_idx.size(); ++i) {
    if (doc_idx[i] < doc_idx[i - 1]) {
      fail(name, ": doc_idx[", i, "] = ", doc_idx[i], " is smaller than doc_idx[", i - 1,
           "] = ", doc_idx[i - 1], " (document starts must be non-decreasing)");
    }
  }
  if (static_cast<std::uint64_t>(doc_idx.back()) != sequences) {
    fail(name, ": doc_idx ends at ", doc_idx.back(), " but the index has ", sequences,
         " sequences (the last entry must be the number of sequences)");
  }
}

DatasetIndex parse_mmap(std::string_view bytes, const std::string& name) {
  if (bytes.size() < kMmapHeaderSize) {
    fail(name, ": truncated: ", bytes.size(), " bytes, but an MMIDIDX header has ",
         kMmapHeaderSize);
  }
  check_version(name, load<std::uint64_t>(bytes, 9));
  DatasetIndex index;
  index.impl = DatasetImpl::kMmap;
  index.dtype = read_dtype(name, load<std::uint8_t>(bytes, 17));
  const auto n = load<std::uint64_t>(bytes, 18);
  const auto d = load<std::uint64_t>(bytes, 26);
  require_length(name, bytes.size(), described_size(kMmapHeaderSize, {{n, 12}, {d, 8}}),
                 base::cat("N = ", n, " sequences and D = ", d, " doc_idx entries"));

  std::size_t offset = kMmapHeaderSize;
  index.sizes = load_array<std::int32_t>(bytes, offset, n);
  offset += 4 * n;
  index.pointers = load_array<std::int64_t>(bytes, offset, n);
  offset += 8 * n;
  index.doc_idx = load_array<std::int64_t>(bytes, offset, d);

  // Upstream readers locate tokens through pointers, the merge tool through sizes; a file where
  // the two disagree would read differently after merging, so it is rejected here.
  const std::int64_t itemsize = static_cast<std::int64_t>(dtype_size(index.dtype));
  std::int64_t expected = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (index.sizes[i] < 0) fail(name, ": sizes[", i, "] = ", index.sizes[i], " is negative");
    if (index.pointers[i] != expected) {
      fail(name, ": pointers[", i, "] = ", index.pointers[i], ", expected ", expected,
           " (the byte offset that sizes[0..", i, ") give)");
    }
    if (__builtin_add_overflow(expected, index.sizes[i] * itemsize, &expected)) {
      fail(name, ": the sequences hold more than 2^63 bytes");
    }
  }
  check_doc_idx(name, index.doc_idx, n);
  return index;
}

DatasetIndex parse_legacy(std::string_view bytes, const std::string& name) {
  if (bytes.size() < kLegacyHeaderSize) {
    fail(name, ": truncated: ", bytes.size(), " bytes, but a TNTIDX header has ",
         kLegacyHeaderSize);
  }
  check_version(name, load<std::uint64_t>(bytes, 8));
  DatasetIndex index;
  index.impl = DatasetImpl::kCached;
  index.dtype = read_dtype(name, load<std::uint64_t>(bytes, 16));
  const auto element_size = load<std::uint64_t>(bytes, 24);
  if (element_size != dtype_size(index.dtype)) {
    fail(name, ": element size ", element_size, " does not match dtype ", dtype_name(index.dtype),
         " (", dtype_size(index.dtype), " bytes)");
  }
  const auto items = load<std::uint64_t>(bytes, 32);
  const auto num_sizes = load<std::uint64_t>(bytes, 40);
  const auto d = load<std::uint64_t>(bytes, 48);
  std::optional<std::uint64_t> need;
  if (items < std::numeric_limits<std::uint64_t>::max()) {
    need = described_size(kLegacyHeaderSize, {{items + 1, 16}, {num_sizes, 8}, {d, 8}});
  }
  require_length(name, bytes.size(), need,
                 base::cat("L = ", items, " items, S = ", num_sizes, " sizes and D = ", d,
                           " doc_idx entries"));
  if (num_sizes != items) {
    fail(name, ": multi-dimensional items are not supported (", items, " items but ", num_sizes,
         " size entries; token datasets have one size per item)");
  }

  std::size_t offset = kLegacyHeaderSize;
  const std::size_t dim_offsets_at = offset;
  offset += 8 * (items + 1);
  const std::size_t data_offsets_at = offset;
  offset += 8 * (items + 1);
  const std::size_t sizes_at = offset;
  offset += 8 * items;
  index.doc_idx = load_array<std::int64_t>(bytes, offset, d);

  // Only 1-D items exist here, so dim_offsets must count 0, 1, ..., L and data_offsets must be the
  // running sum of sizes; both are rebuilt from sizes when written, which keeps round trips exact.
  index.sizes.resize(items);
  index.pointers.resize(items);
  std::int64_t element = 0;
  for (std::size_t i = 0; i <= items; ++i) {
    const auto dim_offset = load<std::int64_t>(bytes, dim_offsets_at + 8 * i);
    if (dim_offset != static_cast<std::int64_t>(i)) {
      fail(name, ": dim_offsets[", i, "] = ", dim_offset, ", expected ", i,
           " (multi-dimensional items are not supported)");
    }
    const auto data_offset = load<std::int64_t>(bytes, data_offsets_at + 8 * i);
    if (data_offset != element) {
      fail(name, ": data_offsets[", i, "] = ", data_offset, ", expected ", element,
           " (the element offset that sizes[0..", i, ") give)");
    }
    std::int64_t pointer = 0;
    if (__builtin_mul_overflow(element, static_cast<std::int64_t>(element_size), &pointer)) {
      fail(name, ": the items hold more than 2^63 bytes");
    }
    if (i == items) break;
    index.pointers[i] = pointer;
    const auto size = load<std::int64_t>(bytes, sizes_at + 8 * i);
    if (size < 0) fail(name, ": sizes[", i, "] = ", size, " is negative");
    if (size > std::numeric_limits<std::int32_t>::max()) {
      fail(name, ": sizes[", i, "] = ", size, " is larger than 2^31-1 tokens (not supported)");
    }
    index.sizes[i] = static_cast<std::int32_t>(size);
    if (__builtin_add_overflow(element, size, &element)) {
      fail(name, ": the items hold more than 2^63 elements");
    }
  }
  check_doc_idx(name, index.doc_idx, items);
  return index;
}

std::string describe_start(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (std::size_t i = 0; i < bytes.size() && i < 9; ++i) {
    const auto byte = static_cast<unsigned char>(bytes[i]);
    if (!text.empty()) text += ' ';
    text += kHex[byte >> 4];
    text += kHex[byte & 15];
  }
  return text;
}

std::string bin_name_for(const std::string& idx_name) {
  if (idx_name.size() > 4 && idx_name.ends_with(".idx")) {
    return idx_name.substr(0, idx_name.size() - 4) + ".bin";
  }
  return "the .bin of " + idx_name;
}

// Emits count int64 values produced by value(i) through a small buffer.
template <typename Value>
void emit_int64s(const detail::ByteSink& sink, std::size_t count, Value value) {
  std::array<std::int64_t, 4096> chunk;
  for (std::size_t start = 0; start < count; start += chunk.size()) {
    const std::size_t n = std::min(chunk.size(), count - start);
    for (std::size_t k = 0; k < n; ++k) chunk[k] = value(start + k);
    sink(chunk.data(), n * sizeof(std::int64_t));
  }
}

void emit_u64(const detail::ByteSink& sink, std::uint64_t value) {
  sink(&value, sizeof value);
}

template <typename T>
void emit_vector(const detail::ByteSink& sink, const std::vector<T>& values) {
  if (!values.empty()) sink(values.data(), values.size() * sizeof(T));
}

}  // namespace

namespace detail {

void write_index(const DatasetIndex& index, const ByteSink& sink) {
  const std::size_t n = index.sizes.size();
  const auto code = static_cast<std::uint8_t>(index.dtype);
  const auto itemsize = static_cast<std::int64_t>(dtype_size(index.dtype));
  if (index.impl == DatasetImpl::kMmap) {
    sink(kMmapMagic.data(), kMmapMagic.size());
    emit_u64(sink, 1);
    sink(&code, 1);
    emit_u64(sink, n);
    emit_u64(sink, index.doc_idx.size());
    emit_vector(sink, index.sizes);
    // Pointers are recomputed as upstream's writer does (never copied from inputs), which is what
    // makes merged files byte-identical to preprocessing everything at once.
    std::int64_t pointer = 0;
    emit_int64s(sink, n, [&](std::size_t i) {
      const std::int64_t current = pointer;
      pointer += static_cast<std::int64_t>(index.sizes[i]) * itemsize;
      return current;
    });
    emit_vector(sink, index.doc_idx);
    return;
  }
  sink(kLegacyMagic.data(), kLegacyMagic.size());
  emit_u64(sink, 1);
  emit_u64(sink, code);
  emit_u64(sink, static_cast<std::uint64_t>(itemsize));
  emit_u64(sink, n);
  emit_u64(sink, n);
  emit_u64(sink, index.doc_idx.size());
  emit_int64s(sink, n + 1, [](std::size_t i) { return static_cast<std::int64_t>(i); });
  std::int64_t element = 0;
  emit_int64s(sink, n + 1, [&](std::size_t i) {
    const std::int64_t current = element;
    if (i < n) element += index.sizes[i];
    return current;
  });
  emit_int64s(sink, n, [&](std::size_t i) { return static_cast<std::int64_t>(index.sizes[i]); });
  emit_vector(sink, index.doc_idx);
}

}  // namespace detail

DatasetIndex parse_index(std::string_view bytes, const std::string& name,
                         std::optional<std::uint64_t> bin_size) {
  DatasetIndex index;
  if (bytes.starts_with(kMmapMagic)) {
    index = parse_mmap(bytes, name);
  } else if (bytes.starts_with(kLegacyMagic)) {
    index = parse_legacy(bytes, name);
  } else if (kMmapMagic.starts_with(bytes) || kLegacyMagic.starts_with(bytes)) {
    fail(name, ": truncated: ", bytes.size(), " bytes, too short for an index header");
  } else {
    fail(name, ": bad magic (", describe_start(bytes),
         "): not an indexed dataset index (expected MMIDIDX or TNTIDX)");
  }
  if (bin_size) {
    const std::uint64_t described = index.bin_bytes();
    if (*bin_size < described) {
      fail(bin_name_for(name), " is truncated: ", name, " describes ", described,
           " bytes of tokens, the file has ", *bin_size);
    }
    if (*bin_size > described) {
      fail(bin_name_for(name), " has ", *bin_size - described, " extra bytes: ", name,
           " describes ", described, " bytes of tokens, the file has ", *bin_size);
    }
  }
  return index;
}

std::string serialize_index(const DatasetIndex& index) {
  std::string out;
  detail::write_index(index, [&](const void* data, std::size_t size) {
    out.append(static_cast<const char*>(data), size);
  });
  return out;
}

}  // namespace mds::io
