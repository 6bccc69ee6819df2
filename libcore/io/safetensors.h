// The safetensors format (checkpoints.md §6.5): u64le header length N, N bytes of JSON naming
// each tensor's dtype, shape and byte range, then the data. Reading maps the file and checks
// every rule of the reference reader; writing lays tensors out as Hugging Face's writer does
// (descending dtype alignment, then name; header padded so the data starts on 8 bytes) and
// appears under its name only when complete.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace mds::io {

struct SafetensorsEntry {
  std::string name;
  tensor::DType dtype = tensor::DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte range in the data buffer
  std::uint64_t end = 0;
  std::int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Fails with one line naming the file and the broken rule.
  static SafetensorsFile open(const std::string& path);
  // The same checks on bytes in memory; `name` stands for the file in messages.
  static SafetensorsFile from_bytes(std::string bytes, std::string name);

  const std::string& path() const { return path_; }
  // In the header's order.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The entry called `name`, or nullptr.
  const SafetensorsEntry* find(std::string_view name) const;
  // As find, but fails naming the file and the tensor.
  const SafetensorsEntry& at(std::string_view name) const;
  // The entry's bytes, little-endian, C order.
  std::string_view bytes(const SafetensorsEntry& entry) const;

 private:
  SafetensorsFile() = default;
  void parse();

  std::string path_;
  std::shared_ptr<const void> owner_;  // MappedFile or std::string behind bytes_
  std::string_view bytes_;
  std::uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  tensor::Tensor tensor;  // host, contiguous; fp32, fp16, bf16, fp64, int64 or int32
};

// Writes `tensors` (names unique) with `metadata` (e.g. {"format": "pt"}) to `path` atomically.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

// "F32", "BF16", ... and back; unknown names fail naming `where`.
std::string_view safetensors_dtype_name(tensor::DType dtype);
tensor::DType safetensors_dtype(std::string_view name, const std::string& where);

}  // namespace mds::io
