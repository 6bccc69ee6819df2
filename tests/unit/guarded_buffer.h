// Buffers for kernels run under the SIMT emulation: the elements a kernel may touch, with guard
// regions before and after them filled with 0xFF bytes (NaN in fp32, bf16 and fp16; −1 as an
// integer), so that a read out of bounds brings a NaN into the results and a write out of bounds
// shows when the guards are checked afterwards (ASan sees neither: the guards are inside the
// allocation).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace mds::emulated {

template <typename T>
class GuardedBuffer {
 public:
  static constexpr std::size_t kGuard = 256;  // elements each side

  explicit GuardedBuffer(std::size_t n) : size_(n), storage_(n + 2 * kGuard) {
    std::memset(static_cast<void*>(storage_.data()), 0xFF, storage_.size() * sizeof(T));
  }
  explicit GuardedBuffer(const std::vector<T>& values) : GuardedBuffer(values.size()) {
    assign(values);
  }

  T* data() { return storage_.data() + kGuard; }
  const T* data() const { return storage_.data() + kGuard; }
  std::size_t size() const { return size_; }

  std::vector<T> values() const { return {data(), data() + size_}; }
  void assign(const std::vector<T>& values) {
    if (size_ > 0) std::memcpy(static_cast<void*>(data()), values.data(), size_ * sizeof(T));
  }
  // The elements back to 0xFF bytes, as an output not yet written.
  void poison() { std::memset(static_cast<void*>(data()), 0xFF, size_ * sizeof(T)); }

  // Guard bytes a kernel changed (0 when it stayed in bounds).
  std::size_t guard_bytes_written() const {
    const auto* bytes = reinterpret_cast<const unsigned char*>(storage_.data());
    const std::size_t guard = kGuard * sizeof(T), total = storage_.size() * sizeof(T);
    std::size_t written = 0;
    for (std::size_t i = 0; i < guard; ++i) written += bytes[i] != 0xFF ? 1 : 0;
    for (std::size_t i = total - guard; i < total; ++i) written += bytes[i] != 0xFF ? 1 : 0;
    return written;
  }

 private:
  std::size_t size_;
  std::vector<T> storage_;
};

}  // namespace mds::emulated
