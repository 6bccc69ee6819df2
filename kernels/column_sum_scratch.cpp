#include "kernels/column_sum_scratch.h"

#include "kernels/check.h"

namespace mds::kernels {

float* ColumnSumScratch::partials(std::size_t floats, cudaStream_t stream) {
  return static_cast<float*>(partials_.reserve(floats * sizeof(float), stream));
}

unsigned* ColumnSumScratch::counters(std::int64_t tiles, cudaStream_t stream) {
  const auto bytes = static_cast<std::size_t>(tiles) * sizeof(unsigned);
  const std::size_t before = counters_.capacity();
  void* counters = counters_.reserve(bytes, stream);
  if (counters_.capacity() != before) {  // new memory: zero it before the launch reads it
    check_cuda(cudaMemsetAsync(counters, 0, bytes, stream), "column sums (zero the counters)");
  }
  return static_cast<unsigned*>(counters);
}

}  // namespace mds::kernels
