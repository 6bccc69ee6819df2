#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"

namespace mds::base {
namespace {

constexpr std::size_t kBufferSize = 1 << 20;

void write_all(int fd, const char* data, std::size_t size, const std::string& name) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("cannot write " + name);
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)),
      temp_path_(path_ + ".tmp." + std::to_string(::getpid()) + ".XXXXXX"),
      buffer_(kBufferSize) {
  // mkostemp makes the name unique, so two writers of one path never share a temporary.
  fd_ = ::mkostemp(temp_path_.data(), O_CLOEXEC);
  if (fd_ < 0) fail_errno("cannot create " + temp_path_);
  ::fchmod(fd_, 0644);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void AtomicFile::write(const void* data, std::size_t size) {
  if (size == 0) return;
  const char* bytes = static_cast<const char*>(data);
  written_ += size;
  if (buffered_ + size > buffer_.size()) {
    flush();
    if (size >= buffer_.size()) {
      write_all(fd_, bytes, size, temp_path_);
      return;
    }
  }
  std::memcpy(buffer_.data() + buffered_, bytes, size);
  buffered_ += size;
}

void AtomicFile::append_from_fd(int source_fd, std::uint64_t offset, std::uint64_t size,
                                const std::string& source_name) {
  flush();
  off_t in_offset = static_cast<off_t>(offset);
  std::uint64_t left = size;
  while (left > 0) {
    const ssize_t n = ::copy_file_range(source_fd, &in_offset, fd_, nullptr, left, 0);
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) {
      const ssize_t m = ::sendfile(fd_, source_fd, &in_offset, left);
      if (m < 0) fail_errno("cannot copy " + source_name + " to " + temp_path_);
      if (m == 0) fail("unexpected end of ", source_name, " (file is truncated)");
      left -= static_cast<std::uint64_t>(m);
      continue;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("cannot copy " + source_name + " to " + temp_path_);
    }
    if (n == 0) fail("unexpected end of ", source_name, " (file is truncated)");
    left -= static_cast<std::uint64_t>(n);
  }
  written_ += size;
}

void AtomicFile::flush() {
  if (buffered_ == 0) return;
  write_all(fd_, buffer_.data(), buffered_, temp_path_);
  buffered_ = 0;
}

void AtomicFile::commit() {
  flush();
  if (::fsync(fd_) != 0) fail_errno("cannot sync " + temp_path_);
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(temp_path_.c_str());
    fail_errno("cannot close " + temp_path_);
  }
  fd_ = -1;
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int code = errno;
    ::unlink(temp_path_.c_str());
    errno = code;
    fail_errno("cannot rename " + temp_path_ + " to " + path_);
  }
}

void remove_if_exists(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail_errno("cannot remove " + path);
}

}  // namespace mds::base
