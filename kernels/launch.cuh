// Launches a kernel with the LaunchShape its header computes (device_portable.cuh), so that the
// .cu and the CPU emulation of the unit tests run the same shapes; checks the launch. Included by
// the .cu files only.
#pragma once
#include <cuda_runtime.h>

#include "kernels/check.h"
#include "kernels/device_portable.cuh"

namespace mds::kernels::detail {

inline dim3 dim3_of(Extent e) {
  return dim3(e.x, e.y, e.z);
}

// kernel<<<shape>>>(args…) on `stream`, then check_launch(name). Dynamic shared memory over the
// 48 KiB every kernel may use is opted into first (cudaFuncSetAttribute), as a GPU requires.
template <typename... Params, typename... Args>
void launch(const char* name, void (*kernel)(Params...), const LaunchShape& shape,
            cudaStream_t stream, Args... args) {
  constexpr std::size_t kDefaultSharedBytes = 48 * 1024;
  if (shape.shared_bytes > kDefaultSharedBytes) {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(shape.shared_bytes)),
               name);
  }
  kernel<<<dim3_of(shape.grid), dim3_of(shape.block), shape.shared_bytes, stream>>>(
      static_cast<Params>(args)...);
  check_launch(name);
}

}  // namespace mds::kernels::detail
