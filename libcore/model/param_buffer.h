#pragma once
#include <cstddef>

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
  // The table must outlive the buffer. Host memory starts zeroed.
  ParamBuffer(const ParamTable& table, tensor::DType dtype, tensor::Device device = {});

  const ParamTable& table() const { return *table_; }
  tensor::DType dtype() const { return dtype_; }
  // The local-shaped view of parameter `index` of the table.
  tensor::Tensor view(std::size_t index) const;
  // The whole buffer, padding included, as one vector (for norms, all-reduces, partitions).
  tensor::Tensor flat() const;

 private:
  const ParamTable* table_;
  tensor::DType dtype_;
  tensor::Buffer buffer_;
};

}  // namespace mds::model
