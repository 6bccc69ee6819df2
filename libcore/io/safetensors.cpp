#include "io/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <utility>

#include "base/atomic_file.h"
#include "base/error.h"
#include "config/json_document.h"

namespace mds::io {

namespace {

using tensor::DType;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::kFloat32, "F32"}, {DType::kFloat16, "F16"}, {DType::kBFloat16, "BF16"},
    {DType::kFloat64, "F64"}, {DType::kInt64, "I64"},   {DType::kInt32, "I32"},
    {DType::kInt16, "I16"},   {DType::kInt8, "I8"},     {DType::kUInt16, "U16"},
    {DType::kUInt8, "U8"},    {DType::kBool, "BOOL"},
};

std::uint64_t read_u64le(const unsigned char* p) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | p[i];
  return value;
}

std::uint64_t non_negative(const config::JsonValue& value, const std::string& where) {
  if (!value.is_int64() || value.as_int64() < 0) {
    base::fail(where, " must be a non-negative integer, got ", config::json_kind_name(value));
  }
  return static_cast<std::uint64_t>(value.as_int64());
}

SafetensorsEntry parse_entry(const config::JsonMember& member, const std::string& where) {
  const config::JsonValue& v = member.value;
  if (!v.is_object()) base::fail(where, " must be an object");
  SafetensorsEntry entry;
  entry.name = member.key;
  const config::JsonValue* dtype = v.find("dtype");
  const config::JsonValue* shape = v.find("shape");
  const config::JsonValue* offsets = v.find("data_offsets");
  if (dtype == nullptr || !dtype->is_string()) base::fail(where, ".dtype must be a string");
  entry.dtype = safetensors_dtype(dtype->as_string(), where + ".dtype");
  if (shape == nullptr || !shape->is_array()) base::fail(where, ".shape must be a list");
  std::uint64_t numel = 1;
  for (const config::JsonValue& d : shape->items()) {
    const std::uint64_t extent = non_negative(d, where + ".shape[]");
    if (__builtin_mul_overflow(numel, extent, &numel) ||
        __builtin_mul_overflow(numel, tensor::dtype_size(entry.dtype), &numel) ||
        numel / tensor::dtype_size(entry.dtype) > (std::uint64_t{1} << 62)) {
      base::fail(where, ".shape: too many elements");
    }
    numel /= tensor::dtype_size(entry.dtype);
    entry.shape.push_back(static_cast<std::int64_t>(extent));
  }
  if (offsets == nullptr || !offsets->is_array() || offsets->items().size() != 2) {
    base::fail(where, ".data_offsets must be a list of two integers");
  }
  entry.begin = non_negative(offsets->items()[0], where + ".data_offsets[0]");
  entry.end = non_negative(offsets->items()[1], where + ".data_offsets[1]");
  for (const config::JsonMember& m : v.members()) {
    if (m.key != "dtype" && m.key != "shape" && m.key != "data_offsets") {
      base::fail(where, ": unknown key '", m.key, "'");
    }
  }
  return entry;
}

// Contiguous from 0, no overlaps, sizes matching the shapes, ending at the buffer's end.
void check_layout(const std::vector<SafetensorsEntry>& entries, std::uint64_t data_bytes,
                  const std::string& path) {
  std::vector<const SafetensorsEntry*> sorted;
  for (const SafetensorsEntry& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  std::uint64_t expected_begin = 0;
  for (const SafetensorsEntry* e : sorted) {
    if (e->begin != expected_begin || e->end < e->begin) {
      base::fail(path, ": tensor '", e->name, "' occupies bytes [", e->begin, ", ", e->end,
                 ") but the previous tensor ends at ", expected_begin,
                 " (ranges must be contiguous, without gaps or overlaps)");
    }
    const std::uint64_t size =
        static_cast<std::uint64_t>(e->numel()) * tensor::dtype_size(e->dtype);
    if (e->end - e->begin != size) {
      base::fail(path, ": tensor '", e->name, "' has ", e->end - e->begin, " bytes, its dtype ",
                 safetensors_dtype_name(e->dtype), " and shape need ", size);
    }
    expected_begin = e->end;
  }
  if (expected_begin != data_bytes) {
    base::fail(path, ": the tensors end at byte ", expected_begin, " of a data buffer of ",
               data_bytes, " bytes (truncated or trailing bytes)");
  }
}

}  // namespace

std::int64_t SafetensorsEntry::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

std::string_view safetensors_dtype_name(DType dtype) {
  for (const DTypeName& d : kDTypeNames) {
    if (d.dtype == dtype) return d.name;
  }
  base::fail("safetensors: no name for dtype ", tensor::dtype_name(dtype));
}

DType safetensors_dtype(std::string_view name, const std::string& where) {
  for (const DTypeName& d : kDTypeNames) {
    if (d.name == name) return d.dtype;
  }
  base::fail(where, ": unsupported dtype '", name, "'");
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto mapped = std::make_shared<base::MappedFile>(path);
  SafetensorsFile file;
  file.path_ = path;
  file.bytes_ = mapped->bytes();
  file.owner_ = std::move(mapped);
  file.parse();
  return file;
}

SafetensorsFile SafetensorsFile::from_bytes(std::string bytes, std::string name) {
  auto owned = std::make_shared<std::string>(std::move(bytes));
  SafetensorsFile file;
  file.path_ = std::move(name);
  file.bytes_ = *owned;
  file.owner_ = std::move(owned);
  file.parse();
  return file;
}

void SafetensorsFile::parse() {
  const std::string& path = path_;
  const std::uint64_t size = bytes_.size();
  if (size < 8) base::fail(path, ": ", size, " bytes is too short for a safetensors file");
  const std::uint64_t header_bytes =
      read_u64le(reinterpret_cast<const unsigned char*>(bytes_.data()));
  if (header_bytes > kMaxHeaderBytes || header_bytes > size - 8) {
    base::fail(path, ": header length ", header_bytes, " does not fit in the file of ", size,
               " bytes (or exceeds 100 MB)");
  }
  const std::string_view header = bytes_.substr(8, header_bytes);
  if (header.empty() || header.front() != '{') base::fail(path, ": the header must start with '{'");
  const config::JsonValue root = config::parse_json(header, path + " header");
  if (!root.is_object()) base::fail(path, ": the header is not a JSON object");
  for (const config::JsonMember& member : root.members()) {
    const std::string where = path + ": tensor '" + member.key + "'";
    if (member.key == "__metadata__") {
      if (!member.value.is_object()) base::fail(path, ": __metadata__ must be an object");
      for (const config::JsonMember& m : member.value.members()) {
        if (!m.value.is_string()) base::fail(path, ": __metadata__.", m.key, " must be a string");
        metadata_[m.key] = m.value.as_string();
      }
      continue;
    }
    entries_.push_back(parse_entry(member, where));
  }
  data_start_ = 8 + header_bytes;
  check_layout(entries_, size - data_start_, path);
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  for (const SafetensorsEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const SafetensorsEntry& SafetensorsFile::at(std::string_view name) const {
  const SafetensorsEntry* entry = find(name);
  if (entry == nullptr) base::fail(path(), ": no tensor '", name, "'");
  return *entry;
}

std::string_view SafetensorsFile::bytes(const SafetensorsEntry& entry) const {
  return bytes_.substr(data_start_ + entry.begin, entry.end - entry.begin);
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const NamedTensor*> order;
  std::set<std::string_view> names;
  for (const NamedTensor& t : tensors) {
    if (!names.insert(t.name).second) base::fail(path, ": tensor '", t.name, "' given twice");
    safetensors_dtype_name(t.tensor.dtype());
    order.push_back(&t);
  }
  std::stable_sort(order.begin(), order.end(), [](const NamedTensor* a, const NamedTensor* b) {
    const std::size_t sa = tensor::dtype_size(a->tensor.dtype());
    const std::size_t sb = tensor::dtype_size(b->tensor.dtype());
    return sa != sb ? sa > sb : a->name < b->name;
  });
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ',';
      header += config::json_quote(key);
      header += ':';
      header += config::json_quote(value);
      first = false;
    }
    header += "}";
  }
  std::uint64_t offset = 0;
  for (const NamedTensor* t : order) {
    if (header.size() > 1) header += ",";
    header += config::json_quote(t->name);
    header += ":{\"dtype\":\"";
    header += safetensors_dtype_name(t->tensor.dtype());
    header += "\",\"shape\":[";
    const tensor::Shape& shape = t->tensor.shape();
    for (std::size_t d = 0; d < shape.rank(); ++d) {
      if (d > 0) header += ',';
      header += std::to_string(shape[d]);
    }
    const std::uint64_t bytes = t->tensor.bytes();
    header += "],\"data_offsets\":[";
    header += std::to_string(offset);
    header += ',';
    header += std::to_string(offset + bytes);
    header += "]}";
    offset += bytes;
  }
  header += "}";
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  base::AtomicFile out(path);
  out.write(length, sizeof length);
  out.write(header.data(), header.size());
  for (const NamedTensor* t : order) out.write(t->tensor.raw(), t->tensor.bytes());
  out.commit();
}

}  // namespace mds::io
