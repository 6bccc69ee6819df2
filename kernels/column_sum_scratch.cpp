#include "kernels/column_sum_scratch.h"

#include "kernels/check.h"

namespace mds::kernels {

ColumnSumScratch::~ColumnSumScratch() {
  // cudaFree waits for the device, so no launch still uses them; failures have no one to tell.
  (void)cudaFree(partials_);
  (void)cudaFree(counters_);
}

float* ColumnSumScratch::partials(std::size_t floats, cudaStream_t stream) {
  if (floats <= partial_capacity_) return partials_;
  if (partials_ != nullptr) {
    check_cuda(cudaFreeAsync(partials_, stream), "column sums (free the partials)");
  }
  partials_ = nullptr;
  partial_capacity_ = 0;
  void* memory = nullptr;
  check_cuda(cudaMallocAsync(&memory, floats * sizeof(float), stream),
             "column sums (allocate the partials)");
  partials_ = static_cast<float*>(memory);
  partial_capacity_ = floats;
  return partials_;
}

unsigned* ColumnSumScratch::counters(std::int64_t tiles, cudaStream_t stream) {
  if (tiles <= counter_capacity_) return counters_;
  if (counters_ != nullptr) {
    check_cuda(cudaFreeAsync(counters_, stream), "column sums (free the counters)");
  }
  counters_ = nullptr;
  counter_capacity_ = 0;
  const auto bytes = static_cast<std::size_t>(tiles) * sizeof(unsigned);
  void* memory = nullptr;
  check_cuda(cudaMallocAsync(&memory, bytes, stream), "column sums (allocate the counters)");
  counters_ = static_cast<unsigned*>(memory);
  check_cuda(cudaMemsetAsync(counters_, 0, bytes, stream), "column sums (zero the counters)");
  counter_capacity_ = tiles;
  return counters_;
}

}  // namespace mds::kernels
