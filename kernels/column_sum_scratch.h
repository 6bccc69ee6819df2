// The device memory of the column sums (kernels/reduce_columns.cuh) that the bias and LayerNorm
// parameter gradients of kernels/gelu.h, dropout.h, gemm.h and layernorm.h take: the chunks'
// partial sums and the column tiles' arrival counters, kept between calls so that a column sum is
// one launch with no allocation. The counters start zero and every launch leaves them zero.
//
// One scratch serves one stream: launches on a stream run one after another, so they can share
// it; launches on two streams at once must not.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/scratch.h"

namespace mds::kernels {

class ColumnSumScratch {
 public:
  // At least `floats` partials and `tiles` zeroed counters, on `stream` (grown there when short,
  // the new counters zeroed in stream order).
  float* partials(std::size_t floats, cudaStream_t stream);
  unsigned* counters(std::int64_t tiles, cudaStream_t stream);

 private:
  Scratch partials_, counters_;
};

}  // namespace mds::kernels
