// What a CUDA DeviceContext owns (ops/device_context.h), for ops/cuda/*.cpp only: this header
// needs the CUDA runtime.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "kernels/column_sum_scratch.h"
#include "kernels/gemm.h"
#include "ops/device_context.h"

namespace mds::ops::cuda {

// Device memory that ops borrow for the duration of their queued work (sort keys, reduction
// partials): grows to the largest request and is kept, so that steady-state steps allocate
// nothing. Requests are stream-ordered: a grown buffer replaces the old one after the work already
// queued on the stream.
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

struct Resources {
  // Makes the device current, then creates the handle, its workspace and the stream there.
  explicit Resources(int device_index);
  ~Resources();
  Resources(const Resources&) = delete;
  Resources& operator=(const Resources&) = delete;

  int device;
  kernels::GemmContext gemm;
  // A blocking stream (cudaStreamCreate): tensor::copy's legacy-default-stream copies are then
  // ordered with its kernels without explicit events.
  cudaStream_t stream = nullptr;
  // Host copies of per-token values that the loss hands to the host.
  std::vector<float> staging;
  Scratch scratch;
  // The column sums' partials and arrival counters (bias and LayerNorm parameter gradients).
  kernels::ColumnSumScratch column_sums;
};

inline cudaStream_t stream_of(const DeviceContext& ctx) {
  return ctx.cuda().stream;
}

}  // namespace mds::ops::cuda
