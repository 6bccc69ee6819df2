// Memory on the devices a Tensor can live on: allocation for Buffer, and copies between any two
// devices. CUDA memory comes from the CUDA runtime when the build has the CUDA backend
// (BUILD_CUDA, which defines MDS_WITH_CUDA); without it every request for CUDA memory fails with
// one line saying so, and host memory works as before.
#pragma once
#include <cstddef>
#include <string>

#include "tensor/tensor.h"

namespace mds::tensor {

#if defined(MDS_WITH_CUDA)
inline constexpr bool kCudaBuilt = true;
#else
inline constexpr bool kCudaBuilt = false;
#endif

// "cpu", "cuda:0".
std::string device_name(Device device);

// How many CUDA devices this process can use: 0 without the CUDA backend, without a driver or
// without a device (never fails, so that callers can choose a device with it).
int cuda_device_count();
// The device's product name ("NVIDIA H100 80GB HBM3"); fails when it does not exist.
std::string cuda_device_description(int index);

// `bytes` of zero-filled memory on `device` (null for 0 bytes), aligned to at least 64 bytes;
// fails with the byte count and the device when it cannot be had. CUDA memory is allocated on
// device.index, which becomes the calling thread's current CUDA device.
void* allocate_zeroed(std::size_t bytes, Device device);
void free_memory(void* data, Device device);

// dst ← src, byte for byte, between any two devices: equal dtypes and element counts (shapes may
// differ). Synchronous: the data are in place when it returns. Device copies go through CUDA's
// legacy default stream, which orders them after the work already queued on every blocking stream
// (the DeviceContext streams of ops/) and before work queued later.
void copy(Tensor dst, Tensor src);

}  // namespace mds::tensor
