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

CallScratch::CallScratch(Scratch* shared, std::size_t bytes, cudaStream_t stream)
    : stream_(stream) {
  if (shared != nullptr) {
    data_ = shared->reserve(bytes, stream);
    return;
  }
  check_cuda(cudaMallocAsync(&owned_, bytes, stream), "CallScratch (cudaMallocAsync)");
  data_ = owned_;
}

CallScratch::~CallScratch() {
  // An error here also fails the next checked call on the stream.
  if (owned_ != nullptr) (void)cudaFreeAsync(owned_, stream_);
}

}  // namespace mds::kernels
