#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace mds::tensor {

enum class DeviceKind : std::uint8_t { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};

// C++ element type of a DType, for typed access.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::kBFloat16;
}
template <>
constexpr DType dtype_of<Float16>() {
  return DType::kFloat16;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType dtype_of<std::uint16_t>() {
  return DType::kUInt16;
}
template <>
constexpr DType dtype_of<std::uint8_t>() {
  return DType::kUInt8;
}

// A view of contiguous, row-major memory owned elsewhere (a Buffer or an Arena). Copying a Tensor
// copies the view, never the data; a Tensor never allocates.
class Tensor {
 public:
  Tensor() = default;
  Tensor(void* data, DType dtype, Shape shape, Device device = {})
      : data_(data), dtype_(dtype), shape_(shape), device_(device) {}

  void* raw() const { return data_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Device device() const { return device_; }
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  std::int64_t dim(std::size_t i) const { return shape_[i]; }
  bool defined() const { return data_ != nullptr || numel() == 0; }

  // Typed pointer; fails if T does not match the dtype.
  template <typename T>
  T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(data_);
  }
  // Typed span of host memory; fails for device tensors or a dtype mismatch.
  template <typename T>
  std::span<T> host_span() const {
    check_host();
    return {data<T>(), static_cast<std::size_t>(numel())};
  }

  // The same memory with another shape of equal element count.
  Tensor reshape(Shape shape) const;
  // Rows [start, start + count) of the outermost dimension.
  Tensor narrow(std::int64_t start, std::int64_t count) const;

 private:
  void check_dtype(DType expected) const;
  void check_host() const;

  void* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  Device device_;
};

}  // namespace mds::tensor
