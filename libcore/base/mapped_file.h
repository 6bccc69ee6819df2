#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mds::base {

// A whole file mapped read-only into memory. An empty file maps to an empty view.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::string_view bytes() const { return {reinterpret_cast<const char*>(data_), size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

bool file_exists(const std::string& path);
// Size in bytes of a regular file; fails with a clear message if it cannot be read.
std::uint64_t file_size(const std::string& path);
// The whole file, copied; fails with "<path>: <strerror>" if it cannot be opened or read.
std::string read_file(const std::string& path);

}  // namespace mds::base
