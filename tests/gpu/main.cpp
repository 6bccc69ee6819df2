// gpu_tests' main: runs the tests only where a CUDA device exists. Elsewhere it says so on one line
// and exits 77, which tests/gpu/CMakeLists.txt maps to CTest's "skipped".
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

namespace {
constexpr int kSkipExitCode = 77;  // SKIP_RETURN_CODE in CMakeLists.txt
}

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device (cudaGetDeviceCount: %s, %d devices)\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "ok", devices);
    return kSkipExitCode;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
