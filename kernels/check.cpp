#include "kernels/check.h"

#include "base/error.h"

namespace mds::kernels {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) base::fail("cuda: ", what, ": ", cudaGetErrorString(status));
}

void check_launch(const char* kernel) {
  check_cuda(cudaGetLastError(), kernel);
}

}  // namespace mds::kernels
