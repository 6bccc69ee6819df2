#include "io/torch_file.h"

#include <set>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "io/pickle_reader.h"
#include "io/pickle_writer.h"
#include "io/zip_store.h"

namespace mds::io {

namespace {

// Tensors of the tree, each with its storage, in pickling order.
void collect_tensors(const Value& v, std::vector<const TensorRef*>& out) {
  if (v.is(Value::Kind::kTensor)) return out.push_back(&v.as_tensor());
  for (const auto* group : {&v.keys(), &v.items(), &v.args()}) {
    for (const auto& child : *group) collect_tensors(child, out);
  }
  if (v.state()) collect_tensors(*v.state(), out);
}

void write_archive(const Value& root, const TorchStorages& storages,
                   const TorchWriteOptions& options, const ZipWriter::Sink& sink) {
  const std::string& prefix = options.archive_name;
  if (prefix.empty() || prefix.find('/') != std::string::npos) {
    base::fail("torch file: archive name '", prefix, "' must be one non-empty path component");
  }
  std::vector<const TensorRef*> tensors;
  collect_tensors(root, tensors);
  std::set<std::string> used;
  for (const TensorRef* t : tensors) {
    const auto it = storages.find(t->storage_key);
    if (it == storages.end())
      base::fail("torch file: tensor refers to missing storage '", t->storage_key, "'");
    const TorchStorage& s = it->second;
    if (s.dtype != t->dtype) {
      base::fail("torch file: storage '", t->storage_key, "' holds ", tensor::dtype_name(s.dtype),
                 " but a tensor reads it as ", tensor::dtype_name(t->dtype));
    }
    if (s.bytes.size() % tensor::dtype_size(s.dtype) != 0) {
      base::fail("torch file: storage '", t->storage_key,
                 "' size is not a multiple of its element size");
    }
    if (!t->fits_in(static_cast<std::int64_t>(s.bytes.size() / tensor::dtype_size(s.dtype)))) {
      base::fail("torch file: a tensor view does not fit in storage '", t->storage_key, "'");
    }
    used.insert(t->storage_key);
  }
  const std::string pickle = write_pickle(root, [&](const TensorRef& t) {
    return static_cast<std::int64_t>(storages.at(t.storage_key).bytes.size() /
                                     tensor::dtype_size(t.dtype));
  });
  ZipWriter zip(sink, options.zip64_threshold);
  zip.add(prefix + "/data.pkl", pickle);
  for (const auto& key : used) zip.add(prefix + "/data/" + key, storages.at(key).bytes);
  zip.add(prefix + "/version", "3\n");
  zip.finish();
}

}  // namespace

std::string torch_file_bytes(const Value& root, const TorchStorages& storages,
                             const TorchWriteOptions& options) {
  std::string out;
  write_archive(root, storages, options,
                [&](const char* data, std::size_t size) { out.append(data, size); });
  return out;
}

void write_torch_file(const std::string& path, const Value& root, const TorchStorages& storages,
                      const TorchWriteOptions& options) {
  base::AtomicFile file(path);
  write_archive(root, storages, options,
                [&](const char* data, std::size_t size) { file.write(data, size); });
  file.commit();
}

TorchFile TorchFile::open(const std::string& path) {
  auto mapped = std::make_shared<base::MappedFile>(path);
  TorchFile f;
  f.name_ = path;
  f.bytes_ = mapped->bytes();
  f.owner_ = std::move(mapped);
  f.load();
  return f;
}

TorchFile TorchFile::from_bytes(std::string bytes, std::string name) {
  auto owned = std::make_shared<std::string>(std::move(bytes));
  TorchFile f;
  f.name_ = std::move(name);
  f.bytes_ = *owned;
  f.owner_ = std::move(owned);
  f.load();
  return f;
}

void TorchFile::load() {
  // Before 1.6 torch.save wrote a pickle stream that starts with torch's magic number
  // 0x1950a86a20f9469cfc6c pickled as a long (protocol 2).
  static constexpr std::string_view kLegacyMagic =
      "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
  if (bytes_.starts_with(kLegacyMagic)) {
    base::fail(name_,
               ": torch's legacy (pre-1.6) serialization, which mds does not read; re-save it "
               "in the zip format with torch >= 1.6: torch.save(torch.load(path), path)");
  }
  const auto entries = read_zip_directory(bytes_, name_);
  if (entries.empty()) base::fail(name_, ": empty zip archive, not a torch file");
  // One top-level folder holds every record; its name is free (torch uses the file stem).
  const auto slash = entries.front().name.find('/');
  if (slash == std::string::npos || slash == 0)
    base::fail(name_, ": record ", entries.front().name, " is not in a folder");
  prefix_ = entries.front().name.substr(0, slash);
  for (const auto& e : entries) {
    if (e.name.size() <= slash + 1 || e.name.compare(0, slash + 1, prefix_ + "/") != 0) {
      base::fail(name_, ": record ", e.name, " lies outside the archive folder ", prefix_, "/");
    }
    records_[e.name.substr(slash + 1)] = Record{bytes_.substr(e.data_offset, e.size), e.crc32};
  }
  const auto version = records_.find("version");
  if (version == records_.end()) base::fail(name_, ": missing ", prefix_, "/version record");
  const auto& v = version->second.bytes;
  if (v.empty() || v.size() > 4 || v.front() < '1' || v.front() > '9') {
    base::fail(name_, ": unsupported torch file version '", v, "'");
  }
  if (const auto order = records_.find("byteorder");
      order != records_.end() && order->second.bytes != "little") {
    base::fail(name_, ": storages in byte order '", order->second.bytes, "' are not supported");
  }
  const auto pickle = records_.find("data.pkl");
  if (pickle == records_.end()) base::fail(name_, ": missing ", prefix_, "/data.pkl record");
  if (crc32_of(pickle->second.bytes) != pickle->second.crc32)
    base::fail(name_, ": data.pkl fails its CRC check");
  root_ = read_pickle(pickle->second.bytes, name_ + ":data.pkl");
  check_storages(root_);
}

void TorchFile::check_storages(const Value& value) {
  if (value.is(Value::Kind::kTensor) || value.is(Value::Kind::kStorage)) {
    const TensorRef& t = value.as_tensor();
    const auto record = records_.find("data/" + t.storage_key);
    if (record == records_.end())
      base::fail(name_, ": missing storage record data/", t.storage_key);
    const auto [it, inserted] = storage_types_.emplace(t.storage_key, t.dtype);
    if (!inserted && it->second != t.dtype)
      base::fail(name_, ": storage ", t.storage_key, " is read as two dtypes");
    std::uint64_t expected = 0;
    if (__builtin_mul_overflow(static_cast<std::uint64_t>(t.storage_numel),
                               tensor::dtype_size(t.dtype), &expected) ||
        record->second.bytes.size() != expected) {
      base::fail(name_, ": storage ", t.storage_key, " has ", record->second.bytes.size(),
                 " bytes, expected ", t.storage_numel, " × ", tensor::dtype_size(t.dtype));
    }
    return;
  }
  for (const auto* group : {&value.keys(), &value.items(), &value.args()}) {
    for (const auto& child : *group) check_storages(child);
  }
  if (value.state()) check_storages(*value.state());
}

std::string_view TorchFile::storage_bytes(const std::string& key) const {
  const auto it = records_.find("data/" + key);
  if (it == records_.end() || !storage_types_.count(key)) base::fail(name_, ": no storage ", key);
  return it->second.bytes;
}

std::string TorchFile::tensor_bytes(const TensorRef& t) const {
  const std::string_view storage = storage_bytes(t.storage_key);
  const std::size_t element = tensor::dtype_size(t.dtype);
  if (!t.fits_in(static_cast<std::int64_t>(storage.size() / element))) {
    base::fail(name_, ": tensor view does not fit in storage ", t.storage_key);
  }
  const std::int64_t numel = t.numel();
  if (numel == 0) return {};
  if (t.strides == TensorRef::contiguous_strides(t.shape)) {
    return std::string(storage.substr(static_cast<std::size_t>(t.storage_offset) * element,
                                      static_cast<std::size_t>(numel) * element));
  }
  std::string out;
  out.reserve(static_cast<std::size_t>(numel) * element);
  std::vector<std::int64_t> index(t.shape.size(), 0);
  for (std::int64_t n = 0; n < numel; ++n) {
    std::int64_t offset = t.storage_offset;
    for (std::size_t d = 0; d < index.size(); ++d) offset += index[d] * t.strides[d];
    out.append(storage.substr(static_cast<std::size_t>(offset) * element, element));
    for (std::size_t d = index.size(); d-- > 0;) {
      if (++index[d] < t.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

void TorchFile::verify_checksums() const {
  for (const auto& [path, record] : records_) {
    if (crc32_of(record.bytes) != record.crc32)
      base::fail(name_, ": record ", prefix_, "/", path, " fails its CRC check");
  }
}

}  // namespace mds::io
