#include "model/param_buffer.h"

#include "base/error.h"

namespace mds::model {

ParamBuffer::ParamBuffer(const ParamTable& table, tensor::DType dtype, tensor::Device device)
    : table_(&table),
      dtype_(dtype),
      buffer_(static_cast<std::size_t>(table.buffer_numel()) * tensor::dtype_size(dtype), device) {}

tensor::Tensor ParamBuffer::view(std::size_t index) const {
  if (index >= table_->size())
    base::fail("ParamBuffer: parameter index ", index, " of ", table_->size());
  const ParamSpec& param = (*table_)[index];
  auto* base = static_cast<std::byte*>(buffer_.data()) +
               static_cast<std::size_t>(param.offset) * tensor::dtype_size(dtype_);
  return tensor::Tensor(base, dtype_, param.local_shape, buffer_.device());
}

tensor::Tensor ParamBuffer::flat() const {
  return tensor::Tensor(buffer_.data(), dtype_, tensor::Shape{table_->buffer_numel()},
                        buffer_.device());
}

}  // namespace mds::model
