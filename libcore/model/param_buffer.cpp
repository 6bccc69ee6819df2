#include "model/param_buffer.h"

#include <algorithm>

#include "base/error.h"

namespace mds::model {

ParamBuffer::ParamBuffer(const ParamTable& table, tensor::DType dtype, tensor::Device device,
                         std::int64_t capacity_numel)
    : table_(&table),
      dtype_(dtype),
      buffer_(static_cast<std::size_t>(std::max(table.buffer_numel(), capacity_numel)) *
                  tensor::dtype_size(dtype),
              device) {}

tensor::Tensor ParamBuffer::view(std::size_t index) const {
  if (index >= table_->size())
    base::fail("ParamBuffer: parameter index ", index, " of ", table_->size());
  const ParamSpec& param = (*table_)[index];
  auto* base = static_cast<std::byte*>(buffer_.data()) +
               static_cast<std::size_t>(param.offset) * tensor::dtype_size(dtype_);
  return tensor::Tensor(base, dtype_, param.local_shape, buffer_.device());
}

std::int64_t ParamBuffer::capacity_numel() const {
  return static_cast<std::int64_t>(buffer_.bytes() / tensor::dtype_size(dtype_));
}

tensor::Tensor ParamBuffer::scratch(std::int64_t numel) const {
  if (numel < 0 || numel > capacity_numel()) {
    base::fail("ParamBuffer: scratch of ", numel, " elements; the buffer holds ", capacity_numel());
  }
  return tensor::Tensor(buffer_.data(), dtype_, tensor::Shape{numel}, buffer_.device());
}

tensor::Tensor ParamBuffer::flat() const {
  return tensor::Tensor(buffer_.data(), dtype_, tensor::Shape{table_->buffer_numel()},
                        buffer_.device());
}

}  // namespace mds::model
