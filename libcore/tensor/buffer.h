#pragma once
#include <cstddef>

#include "tensor/tensor.h"

namespace mds::tensor {

// Owns one block of zero-filled memory on a device (host memory, or CUDA memory when the build has
// the CUDA backend: tensor/device_memory.h), at least 64-byte aligned.
class Buffer {
 public:
  Buffer() = default;
  // Fails with the number of bytes asked for and the device when the memory cannot be had, and
  // with one line for CUDA memory in a build without CUDA.
  Buffer(std::size_t bytes, Device device);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  // A view of the whole buffer with a dtype and shape that must fit in it.
  Tensor as(DType dtype, Shape shape) const;

 private:
  void release();
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
};

}  // namespace mds::tensor
