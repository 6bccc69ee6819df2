// A start and a stop event on one stream, for timing queued work (the GEMM autotuner, the launch
// variants' trials); destroyed however the timing ends.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "kernels/check.h"

namespace mds::kernels {

class TimingEvents {
 public:
  // `what` names the caller in a failure's line.
  explicit TimingEvents(std::string what) : what_(std::move(what)) {
    check_cuda(cudaEventCreate(&start_), (what_ + " (cudaEventCreate)").c_str());
    const cudaError_t status = cudaEventCreate(&stop_);
    if (status != cudaSuccess) cudaEventDestroy(start_);
    check_cuda(status, (what_ + " (cudaEventCreate)").c_str());
  }
  ~TimingEvents() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;

  // Milliseconds the work `queue` puts on `stream` takes, waited for.
  template <typename Queue>
  float time(const Queue& queue, cudaStream_t stream) {
    check_cuda(cudaEventRecord(start_, stream), (what_ + " (cudaEventRecord)").c_str());
    queue();
    check_cuda(cudaEventRecord(stop_, stream), (what_ + " (cudaEventRecord)").c_str());
    check_cuda(cudaEventSynchronize(stop_), (what_ + " (cudaEventSynchronize)").c_str());
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_),
               (what_ + " (cudaEventElapsedTime)").c_str());
    return ms;
  }

  // Milliseconds per call of `calls` calls of `call` after one warm-up.
  template <typename Call>
  float per_call(const Call& call, int calls, cudaStream_t stream) {
    call();
    const float ms = time(
        [&] {
          for (int i = 0; i < calls; ++i) call();
        },
        stream);
    return ms / static_cast<float>(calls);
  }

 private:
  std::string what_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace mds::kernels
