#include "kernels/scratch.h"

#include "kernels/check.h"

namespace mds::kernels {

Scratch::~Scratch() {
  // cudaFree waits for the device, so no queued work still uses it; a failure here has no one to
  // tell.
  (void)cudaFree(data_);
}

void* Scratch::reserve(std::size_t bytes, cudaStream_t stream) {
  if (bytes <= capacity_) return data_;
  if (data_ != nullptr) check_cuda(cudaFreeAsync(data_, stream), "Scratch (cudaFreeAsync)");
  data_ = nullptr;
  capacity_ = 0;
  check_cuda(cudaMallocAsync(&data_, bytes, stream), "Scratch (cudaMallocAsync)");
  capacity_ = bytes;
  return data_;
}

}  // namespace mds::kernels
