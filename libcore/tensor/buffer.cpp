#include "tensor/buffer.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace mds::tensor {
namespace {

constexpr std::size_t kAlignment = 64;

}  // namespace

Buffer::Buffer(std::size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (device.kind != DeviceKind::kCpu) {
    base::fail("device buffers come from the CUDA backend, which this build does not have");
  }
  if (bytes == 0) return;
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  data_ = std::aligned_alloc(kAlignment, rounded);
  if (data_ == nullptr) base::fail("cannot allocate ", bytes, " bytes of host memory");
  std::memset(data_, 0, rounded);
}

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
  std::free(data_);
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
