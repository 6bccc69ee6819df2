#include "kernels/check.h"

#include "base/error.h"

namespace mds::kernels {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) base::fail("cuda: ", what, ": ", cudaGetErrorString(status));
}

void check_launch(const char* kernel) {
  check_cuda(cudaGetLastError(), kernel);
}

void allow_dynamic_shared_memory(const void* kernel, std::size_t bytes, const char* what) {
  constexpr std::size_t kDefaultBytes = 48 * 1024;
  if (bytes <= kDefaultBytes) return;
  int device = 0, per_block = 0;
  check_cuda(cudaGetDevice(&device), what);
  check_cuda(cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             what);
  cudaFuncAttributes attributes{};
  check_cuda(cudaFuncGetAttributes(&attributes, kernel), what);
  const std::size_t allowance = static_cast<std::size_t>(per_block) - attributes.sharedSizeBytes;
  if (bytes > allowance) {
    base::fail("cuda: ", what, ": needs ", bytes, " bytes of shared memory, the device allows ",
               allowance);
  }
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(allowance)),
             what);
}

}  // namespace mds::kernels
