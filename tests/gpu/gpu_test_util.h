// Helpers of the GPU tests: device buffers poisoned with NaN, host↔device copies, random inputs
// and the relative error ‖out − ref‖ / ‖ref‖.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/check.h"
#include "tests/unit/kernel_compare.h"

namespace mds::gpu_test {

// A device array of n T's; new ones are filled with 0xFF bytes, a NaN in fp32, bf16 and fp16 alike,
// so an element a kernel forgets to write shows up as NaN in the error.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : size_(n) {
    kernels::check_cuda(cudaMalloc(&data_, bytes() == 0 ? 1 : bytes()), "test cudaMalloc");
    kernels::check_cuda(cudaMemset(data_, 0xFF, bytes()), "test cudaMemset");
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }

  T* get() { return static_cast<T*>(data_); }
  std::size_t bytes() const { return size_ * sizeof(T); }
  void upload(const std::vector<T>& host) {
    kernels::check_cuda(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice),
                        "test upload");
  }
  std::vector<T> download() const {
    kernels::check_cuda(cudaDeviceSynchronize(), "test synchronize");
    std::vector<T> host(size_);
    kernels::check_cuda(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost),
                        "test download");
    return host;
  }

 private:
  void* data_ = nullptr;
  std::size_t size_;
};

using kernel_test::random_floats;

using kernel_test::relative_error;

// Counts of elements that are not finite: a poisoned element left unwritten.
inline std::size_t non_finite(const std::vector<float>& v) {
  std::size_t count = 0;
  for (const float x : v) count += std::isfinite(x) ? 0 : 1;
  return count;
}

#define MDS_EXPECT_CLOSE(out, ref, bound)                        \
  do {                                                           \
    EXPECT_EQ(::mds::gpu_test::non_finite(out), 0u);             \
    EXPECT_LE(::mds::gpu_test::relative_error(out, ref), bound); \
  } while (0)

// Element counts that straddle the 256-thread block and the 4-element Philox group.
inline const std::vector<std::int64_t>& flat_sizes() {
  static const std::vector<std::int64_t> sizes = {1, 3, 255, 256, 257, 1000, 4099, 65537, 1 << 20};
  return sizes;
}

struct RowsCols {
  std::int64_t rows, cols;
};
inline const std::vector<RowsCols>& matrix_sizes() {
  static const std::vector<RowsCols> sizes = {{1, 1},    {3, 17},   {7, 255},  {5, 256},
                                              {4, 1000}, {2, 4099}, {33, 768}, {129, 64}};
  return sizes;
}

}  // namespace mds::gpu_test
