#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mds::base {

// An output file that appears under its final name only when complete: bytes go to
// "<path>.tmp.<pid>.<unique>" and commit() renames it into place. Destroying an uncommitted file
// removes the temporary, so a failed run never leaves a file that looks valid.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t size);
  // Appends `size` bytes of the open file descriptor `source_fd` from its `offset` (kernel copy).
  void append_from_fd(int source_fd, std::uint64_t offset, std::uint64_t size,
                      const std::string& source_name);
  void flush();
  // Flushes, fsyncs and renames onto the final path.
  void commit();

  std::uint64_t bytes_written() const { return written_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  std::vector<char> buffer_;
  std::size_t buffered_ = 0;
  std::uint64_t written_ = 0;
};

// Removes `path` if it exists (no error when it does not).
void remove_if_exists(const std::string& path);

}  // namespace mds::base
