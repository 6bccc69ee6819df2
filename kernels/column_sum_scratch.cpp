#include "kernels/column_sum_scratch.h"

#include "kernels/check.h"

namespace mds::kernels {

namespace {

// `data` with room for at least `bytes`: replaced (freed, then allocated, in stream order) when
// smaller. Returns whether it was replaced.
bool reserve(void*& data, std::size_t& capacity, std::size_t bytes, cudaStream_t stream,
             const char* what) {
  if (bytes <= capacity) return false;
  if (data != nullptr) check_cuda(cudaFreeAsync(data, stream), what);
  data = nullptr;
  capacity = 0;
  check_cuda(cudaMallocAsync(&data, bytes, stream), what);
  capacity = bytes;
  return true;
}

}  // namespace

ColumnSumScratch::~ColumnSumScratch() {
  // cudaFree waits for the device, so no launch still uses them; failures have no one to tell.
  (void)cudaFree(partials_);
  (void)cudaFree(counters_);
}

float* ColumnSumScratch::partials(std::size_t floats, cudaStream_t stream) {
  reserve(partials_, partial_bytes_, floats * sizeof(float), stream, "column sums (partials)");
  return static_cast<float*>(partials_);
}

unsigned* ColumnSumScratch::counters(std::int64_t tiles, cudaStream_t stream) {
  const auto bytes = static_cast<std::size_t>(tiles) * sizeof(unsigned);
  if (reserve(counters_, counter_bytes_, bytes, stream, "column sums (counters)")) {
    check_cuda(cudaMemsetAsync(counters_, 0, bytes, stream), "column sums (zero the counters)");
  }
  return static_cast<unsigned*>(counters_);
}

}  // namespace mds::kernels
