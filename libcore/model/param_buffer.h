#pragma once
#include <cstddef>
#include <cstdint>

#include "model/param_table.h"
#include "tensor/buffer.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace mds::model {

// One flat buffer of a single dtype laid out by a ParamTable: parameters, their gradients, or
// an fp32 master copy. Buffers built from the same table share offsets, so a gradient view and
// its parameter view are the same slice of two buffers.
class ParamBuffer {
 public:
  // The table must outlive the buffer. Memory starts zeroed. `capacity_numel` (when above
  // table.buffer_numel()) allocates room for that many elements, so that the buffer can lend
  // itself as scratch of another shape while its values are not needed (scratch()).
  ParamBuffer(const ParamTable& table, tensor::DType dtype, tensor::Device device = {},
              std::int64_t capacity_numel = 0);

  const ParamTable& table() const { return *table_; }
  tensor::DType dtype() const { return dtype_; }
  // The local-shaped view of parameter `index` of the table.
  tensor::Tensor view(std::size_t index) const;
  // The whole buffer, padding included, as one vector (for norms, all-reduces, partitions).
  tensor::Tensor flat() const;
  // Elements the allocation holds: max(table().buffer_numel(), the capacity asked for).
  std::int64_t capacity_numel() const;
  // The first `numel` elements of the allocation (at most capacity_numel()) as one vector: the
  // same memory as flat(), for a caller that uses the buffer as scratch between uses of its values.
  tensor::Tensor scratch(std::int64_t numel) const;
  // Bytes allocated.
  std::size_t bytes() const { return buffer_.bytes(); }

 private:
  const ParamTable* table_;
  tensor::DType dtype_;
  tensor::Buffer buffer_;
};

}  // namespace mds::model
