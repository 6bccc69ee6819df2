#pragma once
// Private to libcore/io: the undecoded byte stream under every ByteSource, and the decompressors
// layered on it (decompressors.cpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/input_source.h"

namespace mds::io {

// A file descriptor read with read(2). Detection has to look at the first bytes before choosing a
// decoder, and stdin cannot seek back, so those bytes are kept and handed out again first.
class RawInput {
 public:
  RawInput(int fd, bool owns_fd, std::string name);
  ~RawInput();
  RawInput(const RawInput&) = delete;
  RawInput& operator=(const RawInput&) = delete;

  // Reads until `size` bytes are buffered for replay or the input ends; returns them.
  const std::vector<unsigned char>& peek(std::size_t size);
  // Like read(2) but retries EINTR and throws on errors; returns 0 only at the end.
  std::size_t read(void* buffer, std::size_t size);

  std::uint64_t bytes_consumed() const { return bytes_consumed_; }
  const std::string& name() const { return name_; }

 private:
  std::size_t read_fd(void* buffer, std::size_t size);

  int fd_;
  bool owns_fd_;
  std::string name_;
  std::vector<unsigned char> peeked_;
  std::size_t peeked_offset_ = 0;
  std::uint64_t bytes_consumed_ = 0;
};

std::unique_ptr<ByteSource> make_zstd_source(std::unique_ptr<RawInput> raw);
std::unique_ptr<ByteSource> make_xz_source(std::unique_ptr<RawInput> raw);
std::unique_ptr<ByteSource> make_gzip_source(std::unique_ptr<RawInput> raw);

}  // namespace mds::io
