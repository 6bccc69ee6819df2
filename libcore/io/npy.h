#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"

namespace mds::io {

// The element types Megatron's index caches use (data.md §5.8): doc_idx and sample_idx are int32,
// shuffle_idx uint32 (int64 for huge datasets). All little-endian.
enum class NpyDType { kInt32, kUInt32, kInt64 };
std::string_view npy_descr(NpyDType dtype);  // "<i4", "<u4", "<i8"
std::size_t npy_itemsize(NpyDType dtype);

template <typename T>
constexpr NpyDType npy_dtype_of();
template <>
constexpr NpyDType npy_dtype_of<std::int32_t>() {
  return NpyDType::kInt32;
}
template <>
constexpr NpyDType npy_dtype_of<std::uint32_t>() {
  return NpyDType::kUInt32;
}
template <>
constexpr NpyDType npy_dtype_of<std::int64_t>() {
  return NpyDType::kInt64;
}

// The preamble (magic, version, length, header text) numpy 1.24's np.save writes for a C-order
// array; the data follows it directly. Version 1.0 unless the header needs more than 65535 bytes.
std::string npy_header(NpyDType dtype, std::span<const std::uint64_t> shape);

// Writes `path` byte-identical to np.save (1-D or 2-D), atomically: the file appears under its name
// only once complete, so a crash never leaves a cache file that a later run would trust.
void save_npy(const std::string& path, NpyDType dtype, std::span<const std::uint64_t> shape,
              const void* data);
template <typename T>
void save_npy(const std::string& path, std::span<const T> values,
              std::span<const std::uint64_t> shape) {
  std::uint64_t count = 1;
  for (const std::uint64_t extent : shape) count *= extent;
  if (count != values.size()) {
    base::fail(path, ": ", values.size(), " values do not fill the array shape");
  }
  save_npy(path, npy_dtype_of<T>(), shape, values.data());
}

// What a .npy preamble says. `name` names the file in errors.
struct NpyHeader {
  NpyDType dtype = NpyDType::kInt32;
  std::vector<std::uint64_t> shape;
  std::size_t data_offset = 0;  // bytes before the data
  std::uint64_t num_elements() const;
};
// Parses the preamble of `bytes` (versions 1.0, 2.0, 3.0). The header text is parsed as the Python
// dict literal it is, never assumed to have numpy 1.24's padding. Fails, naming `name` and the
// field at fault, on anything else: other dtypes, big-endian data, Fortran order, truncated files.
NpyHeader parse_npy_header(std::string_view bytes, const std::string& name);

// A .npy file mapped read-only (as np.load(mmap_mode='r')). The data size must match the shape.
class NpyArray {
 public:
  static NpyArray load(const std::string& path);

  const std::string& path() const { return file_.path(); }
  NpyDType dtype() const { return header_.dtype; }
  const std::vector<std::uint64_t>& shape() const { return header_.shape; }
  std::uint64_t size() const { return header_.num_elements(); }
  // Element `i` (flat, C order) widened to int64; uint32 and int32 always fit.
  std::int64_t at(std::uint64_t i) const;
  // The data as T; fails unless T is the file's dtype.
  template <typename T>
  std::span<const T> values() const {
    if (npy_dtype_of<T>() != dtype()) {
      base::fail(path(), ": dtype is ", npy_descr(dtype()), ", expected ",
                 npy_descr(npy_dtype_of<T>()));
    }
    return {reinterpret_cast<const T*>(data_), static_cast<std::size_t>(size())};
  }

 private:
  NpyArray(base::MappedFile file, NpyHeader header);
  base::MappedFile file_;
  NpyHeader header_;
  const unsigned char* data_ = nullptr;
};

}  // namespace mds::io
