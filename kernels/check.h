// Error checks for CUDA runtime calls and kernel launches: a failure throws base::Error naming the
// kernel or call and CUDA's own description of the error.
#pragma once
#include <cuda_runtime_api.h>

namespace mds::kernels {

// Fails "cuda: <what>: <cudaGetErrorString(status)>" unless status is cudaSuccess.
void check_cuda(cudaError_t status, const char* what);
// After a launch: reports a bad configuration (and any earlier asynchronous error) under the
// kernel's name. Does not synchronize.
void check_launch(const char* kernel);

}  // namespace mds::kernels
