#include "tensor/tensor.h"

#include "base/error.h"

namespace mds::tensor {

void Tensor::check_dtype(DType expected) const {
  if (expected != dtype_) {
    base::fail("tensor of ", dtype_name(dtype_), " accessed as ", dtype_name(expected));
  }
}

void Tensor::check_host() const {
  if (device_.kind != DeviceKind::kCpu) base::fail("host access to a device tensor");
}

Tensor Tensor::reshape(Shape shape) const {
  if (shape.numel() != numel()) {
    base::fail("cannot reshape ", shape_.to_string(), " to ", shape.to_string());
  }
  return {data_, dtype_, shape, device_};
}

Tensor Tensor::narrow(std::int64_t start, std::int64_t count) const {
  if (shape_.rank() == 0 || start < 0 || count < 0 || start + count > shape_[0]) {
    base::fail("rows [", start, ", ", start + count, ") out of range for ", shape_.to_string());
  }
  Shape shape = shape_;
  shape[0] = count;
  const std::size_t row_bytes = shape_[0] == 0 ? 0 : bytes() / static_cast<std::size_t>(shape_[0]);
  return {static_cast<char*>(data_) + static_cast<std::size_t>(start) * row_bytes, dtype_, shape,
          device_};
}

}  // namespace mds::tensor
