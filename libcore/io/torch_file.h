#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "io/pickle_value.h"

// PyTorch `.pt` files (torch.save's zip format, checkpoints.md §5): a pickled Value tree plus one
// raw little-endian record per tensor storage.
namespace mds::io {

// One storage to write: `bytes` (kept alive by the caller) holds numel × tensor::dtype_size(dtype)
// bytes.
struct TorchStorage {
  tensor::DType dtype = tensor::DType::kFloat32;
  std::string_view bytes;
};
// Keyed by storage key; records are written in this (string) order, as torch.save sorts them.
using TorchStorages = std::map<std::string, TorchStorage>;

struct TorchWriteOptions {
  std::string archive_name = "archive";  // the records' top-level folder
  std::uint64_t zip64_threshold = 0xFFFFFFFFu;
};

// The .pt bytes for `root`; every tensor in it must name a storage in `storages` of its dtype and
// lie inside it. Storages no tensor refers to are not written.
std::string torch_file_bytes(const Value& root, const TorchStorages& storages,
                             const TorchWriteOptions& options = {});
// Same, streamed to `path` atomically (a temporary file renamed into place when complete).
void write_torch_file(const std::string& path, const Value& root, const TorchStorages& storages,
                      const TorchWriteOptions& options = {});

// A loaded .pt file. Storages are views into the (memory-mapped) file: nothing is copied.
class TorchFile {
 public:
  static TorchFile open(const std::string& path);
  static TorchFile from_bytes(std::string bytes, std::string name);

  const Value& root() const { return root_; }
  ValueRef root_ref() const { return ValueRef(root_, ""); }
  const std::string& prefix() const { return prefix_; }
  const std::string& name() const { return name_; }

  // The whole storage `key` (numel × element size bytes).
  std::string_view storage_bytes(const std::string& key) const;
  // The tensor's elements in row-major order (copied only when the view is not contiguous).
  std::string tensor_bytes(const TensorRef& tensor) const;
  // Checks every record's CRC-32 (reads the whole file).
  void verify_checksums() const;

 private:
  struct Record {
    std::string_view bytes;
    std::uint32_t crc32;
  };
  TorchFile() = default;
  void load();
  void check_storages(const Value& value);

  std::string name_;
  std::shared_ptr<const void> owner_;  // MappedFile or std::string backing `bytes_`
  std::string_view bytes_;
  std::string prefix_;
  std::map<std::string, Record> records_;  // by path below the prefix
  std::map<std::string, tensor::DType> storage_types_;
  Value root_;
};

}  // namespace mds::io
