#include "tensor/buffer.h"

#include <utility>

#include "base/error.h"
#include "tensor/device_memory.h"

namespace mds::tensor {

Buffer::Buffer(std::size_t bytes, Device device)
    : data_(allocate_zeroed(bytes, device)), bytes_(bytes), device_(device) {}

Buffer::~Buffer() {
  release();
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(other.device_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

void Buffer::release() {
  free_memory(data_, device_);
  data_ = nullptr;
}

Tensor Buffer::as(DType dtype, Shape shape) const {
  const std::size_t needed = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  if (needed > bytes_) {
    base::fail("a ", dtype_name(dtype), " tensor of shape ", shape.to_string(), " needs ", needed,
               " bytes; the buffer has ", bytes_);
  }
  return {data_, dtype, shape, device_};
}

}  // namespace mds::tensor
