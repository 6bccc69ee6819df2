#include "tensor/device_memory.h"

#include <cstdlib>
#include <cstring>

#include "base/error.h"

#if defined(MDS_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace mds::tensor {
namespace {

constexpr std::size_t kHostAlignment = 64;

bool is_cpu(Device device) {
  return device.kind == DeviceKind::kCpu;
}

#if defined(MDS_WITH_CUDA)

void check(cudaError_t status, const char* what, Device device) {
  if (status != cudaSuccess) {
    base::fail("cuda: ", what, " on ", device_name(device), ": ", cudaGetErrorString(status));
  }
}

// Makes device.index current, failing with one line when it does not exist.
void use_device(Device device) {
  const int count = cuda_device_count();
  if (device.index < 0 || device.index >= count) {
    base::fail(device_name(device), " does not exist: this process sees ", count, " CUDA device",
               count == 1 ? "" : "s");
  }
  check(cudaSetDevice(device.index), "cudaSetDevice", device);
}

cudaMemcpyKind copy_kind(Device dst, Device src) {
  if (is_cpu(dst)) return is_cpu(src) ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost;
  return is_cpu(src) ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice;
}

#else

[[noreturn]] void no_cuda(Device device) {
  base::fail(device_name(device),
             " was asked for, but this build has no CUDA backend (configure with BUILD_CUDA=ON "
             "where nvcc is installed)");
}

#endif

}  // namespace

std::string device_name(Device device) {
  if (is_cpu(device)) return "cpu";
  return "cuda:" + std::to_string(device.index);
}

int cuda_device_count() {
#if defined(MDS_WITH_CUDA)
  int count = 0;
  // No driver or no device is an error code here, not a failure of the program.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error so later calls report their own
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

std::string cuda_device_description(int index) {
  const Device device{DeviceKind::kCuda, index};
#if defined(MDS_WITH_CUDA)
  use_device(device);
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, index), "cudaGetDeviceProperties", device);
  return properties.name;
#else
  no_cuda(device);
#endif
}

void* allocate_zeroed(std::size_t bytes, Device device) {
  if (bytes == 0) return nullptr;
  if (is_cpu(device)) {
    const std::size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    void* data = std::aligned_alloc(kHostAlignment, rounded);
    if (data == nullptr) base::fail("cannot allocate ", bytes, " bytes of host memory");
    std::memset(data, 0, rounded);
    return data;
  }
#if defined(MDS_WITH_CUDA)
  use_device(device);
  void* data = nullptr;
  // cudaMalloc aligns to 256 bytes.
  const cudaError_t status = cudaMalloc(&data, bytes);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    base::fail("cannot allocate ", bytes, " bytes on ", device_name(device), " (",
               cudaGetErrorString(status), ")");
  }
  check(cudaMemset(data, 0, bytes), "cudaMemset", device);
  return data;
#else
  no_cuda(device);
#endif
}

void free_memory(void* data, Device device) {
  if (data == nullptr) return;
  if (is_cpu(device)) {
    std::free(data);
    return;
  }
#if defined(MDS_WITH_CUDA)
  // Called from destructors: an error here (a context already torn down at exit) has no one to
  // report to.
  (void)cudaFree(data);
#endif
}

void copy(Tensor dst, Tensor src) {
  if (dst.dtype() != src.dtype() || dst.numel() != src.numel()) {
    base::fail("tensor::copy: ", dtype_name(src.dtype()), " ", src.shape().to_string(), " on ",
               device_name(src.device()), " into ", dtype_name(dst.dtype()), " ",
               dst.shape().to_string(), " on ", device_name(dst.device()),
               ": dtypes and element counts must be equal");
  }
  const std::size_t bytes = dst.bytes();
  if (bytes == 0 || dst.raw() == src.raw()) return;
  if (is_cpu(dst.device()) && is_cpu(src.device())) {
    std::memmove(dst.raw(), src.raw(), bytes);
    return;
  }
#if defined(MDS_WITH_CUDA)
  const Device device = is_cpu(dst.device()) ? src.device() : dst.device();
  check(cudaMemcpy(dst.raw(), src.raw(), bytes, copy_kind(dst.device(), src.device())),
        "cudaMemcpy", device);
  // A device-to-device cudaMemcpy may return before the copy ran; the promise is a synchronous
  // copy.
  if (!is_cpu(dst.device()) && !is_cpu(src.device())) {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", device);
  }
#else
  no_cuda(is_cpu(dst.device()) ? src.device() : dst.device());
#endif
}

}  // namespace mds::tensor
