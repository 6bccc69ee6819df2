// Error checks for CUDA runtime calls and kernel launches: a failure throws base::Error naming the
// kernel or call and CUDA's own description of the error.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace mds::kernels {

// Fails "cuda: <what>: <cudaGetErrorString(status)>" unless status is cudaSuccess.
void check_cuda(cudaError_t status, const char* what);
// After a launch: reports a bad configuration (and any earlier asynchronous error) under the
// kernel's name. Does not synchronize.
void check_launch(const char* kernel);

// Lets `kernel` be launched with `bytes` of dynamic shared memory. Past the 48 KiB any kernel may
// use it opts into the device's whole per-block allowance rather than `bytes`: the attribute
// belongs to the kernel in the whole process, and ranks sharing a process launch one kernel with
// different sizes, so one thread lowering it between another's opt-in and launch failed that
// launch ("invalid argument"). Fails naming `what` when the device cannot give `bytes`.
void allow_dynamic_shared_memory(const void* kernel, std::size_t bytes, const char* what);

}  // namespace mds::kernels
