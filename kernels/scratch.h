// Device memory that work queued on one stream borrows (sort keys, reduction partials, counters):
// grows to the largest request and is kept, so that steady-state steps allocate nothing.
// Requests are stream-ordered: a grown buffer replaces the old one after the work already queued
// on the stream.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace mds::kernels {

class Scratch {
 public:
  Scratch() = default;
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // At least `bytes` bytes, valid for work queued on `stream` until the next request.
  void* reserve(std::size_t bytes, cudaStream_t stream);
  std::size_t capacity() const { return capacity_; }

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
};

// Memory for one call's queued work: from `shared` when the caller has one (an op's context),
// else allocated for the call and handed back in stream order when it ends (tests and
// benchmarks that call the kernels directly).
class CallScratch {
 public:
  CallScratch(Scratch* shared, std::size_t bytes, cudaStream_t stream);
  ~CallScratch();
  CallScratch(const CallScratch&) = delete;
  CallScratch& operator=(const CallScratch&) = delete;

  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  void* owned_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace mds::kernels
