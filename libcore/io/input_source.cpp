#include "io/input_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>

#include "base/error.h"
#include "io/raw_input.h"

namespace mds::io {

RawInput::RawInput(int fd, bool owns_fd, std::string name)
    : fd_(fd), owns_fd_(owns_fd), name_(std::move(name)) {}

RawInput::~RawInput() {
  if (owns_fd_) ::close(fd_);
}

std::size_t RawInput::read_fd(void* buffer, std::size_t size) {
  while (true) {
    const ssize_t n = ::read(fd_, buffer, size);
    if (n >= 0) {
      bytes_consumed_ += static_cast<std::uint64_t>(n);
      return static_cast<std::size_t>(n);
    }
    if (errno != EINTR) base::fail_errno(name_ + ": read failed");
  }
}

const std::vector<unsigned char>& RawInput::peek(std::size_t size) {
  while (peeked_.size() < size) {
    const std::size_t have = peeked_.size();
    peeked_.resize(size);
    const std::size_t n = read_fd(peeked_.data() + have, size - have);
    peeked_.resize(have + n);
    if (n == 0) break;  // pipes deliver short reads, so only 0 means the input is shorter
  }
  return peeked_;
}

std::size_t RawInput::read(void* buffer, std::size_t size) {
  if (size == 0) return 0;
  if (peeked_offset_ < peeked_.size()) {
    const std::size_t n = std::min(size, peeked_.size() - peeked_offset_);
    std::memcpy(buffer, peeked_.data() + peeked_offset_, n);
    peeked_offset_ += n;
    if (peeked_offset_ == peeked_.size()) {
      peeked_.clear();
      peeked_.shrink_to_fit();
      peeked_offset_ = 0;
    }
    return n;
  }
  return read_fd(buffer, size);
}

namespace {

class PlainSource final : public ByteSource {
 public:
  explicit PlainSource(std::unique_ptr<RawInput> raw) : raw_(std::move(raw)) {}
  std::size_t read(char* buffer, std::size_t size) override { return raw_->read(buffer, size); }
  std::uint64_t raw_bytes_consumed() const override { return raw_->bytes_consumed(); }

 private:
  std::unique_ptr<RawInput> raw_;
};

bool starts_with(const std::vector<unsigned char>& bytes,
                 std::initializer_list<unsigned char> magic) {
  return bytes.size() >= magic.size() && std::equal(magic.begin(), magic.end(), bytes.begin());
}

Compression detect(const std::vector<unsigned char>& head) {
  if (starts_with(head, {0x28, 0xB5, 0x2F, 0xFD})) return Compression::kZstd;
  if (starts_with(head, {0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00})) return Compression::kXz;
  if (starts_with(head, {0x1F, 0x8B})) return Compression::kGzip;
  return Compression::kNone;
}

}  // namespace

std::string_view compression_name(Compression compression) {
  switch (compression) {
    case Compression::kNone:
      return "none";
    case Compression::kZstd:
      return "zstd";
    case Compression::kXz:
      return "xz";
    case Compression::kGzip:
      return "gzip";
  }
  return "unknown";
}

OpenedInput open_input(const std::string& path) {
  OpenedInput opened;
  std::unique_ptr<RawInput> raw;
  if (path == "-") {
    opened.display_name = "<stdin>";
    raw = std::make_unique<RawInput>(STDIN_FILENO, false, opened.display_name);
  } else {
    opened.display_name = path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) base::fail_errno("cannot open " + path);
    // Owned from here on, so the descriptor is closed if a check below throws.
    raw = std::make_unique<RawInput>(fd, true, path);
    struct stat info {};
    if (::fstat(fd, &info) != 0) base::fail_errno("cannot stat " + path);
    if (S_ISDIR(info.st_mode)) base::fail("cannot read ", path, ": it is a directory");
    if (S_ISREG(info.st_mode)) {
      opened.raw_size = static_cast<std::uint64_t>(info.st_size);
      // A hint only: a kernel that ignores it reads the file just the same.
      (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    }
  }
  opened.compression = detect(raw->peek(6));
  switch (opened.compression) {
    case Compression::kNone:
      opened.source = std::make_unique<PlainSource>(std::move(raw));
      break;
    case Compression::kZstd:
      opened.source = make_zstd_source(std::move(raw));
      break;
    case Compression::kXz:
      opened.source = make_xz_source(std::move(raw));
      break;
    case Compression::kGzip:
      opened.source = make_gzip_source(std::move(raw));
      break;
  }
  return opened;
}

}  // namespace mds::io
