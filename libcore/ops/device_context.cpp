#include "ops/device_context.h"

#include <utility>

#include "base/error.h"
#include "ops/cuda/backend.h"
#include "tensor/device_memory.h"

namespace mds::ops {

// ops/cuda/ exists only in builds with CUDA: calls into it sit in `if constexpr (kCudaBuilt)`
// branches, which a build without CUDA discards (a discarded statement needs no definition of
// what it calls).
using tensor::kCudaBuilt;

DeviceContext::DeviceContext(tensor::Device device, Fp32Matmul fp32_matmul)
    : device_(device), fp32_matmul_(fp32_matmul) {
  if (device.kind == tensor::DeviceKind::kCpu) return;
  if constexpr (kCudaBuilt) {
    cuda_ = cuda::create_resources(device.index, fp32_matmul == Fp32Matmul::kTf32);
  } else {
    base::fail("a DeviceContext for ", tensor::device_name(device),
               " needs the CUDA backend, which this build does not have (BUILD_CUDA=OFF)");
  }
}

DeviceContext::~DeviceContext() {
  release();
}

DeviceContext::DeviceContext(DeviceContext&& other) noexcept
    : device_(other.device_),
      fp32_matmul_(other.fp32_matmul_),
      cuda_(std::exchange(other.cuda_, nullptr)) {
  other.device_ = {};
}

DeviceContext& DeviceContext::operator=(DeviceContext&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::exchange(other.device_, {});
    fp32_matmul_ = other.fp32_matmul_;
    cuda_ = std::exchange(other.cuda_, nullptr);
  }
  return *this;
}

void DeviceContext::release() noexcept {
  if (cuda_ == nullptr) return;
  if constexpr (kCudaBuilt) cuda::destroy_resources(cuda_);
  cuda_ = nullptr;
}

void DeviceContext::synchronize() const {
  if (cuda_ == nullptr) return;
  if constexpr (kCudaBuilt) cuda::synchronize(*this);
}

void DeviceContext::tune_gemms(const std::string& path) {
  if (cuda_ == nullptr) return;
  if constexpr (kCudaBuilt) cuda::tune_gemms(*cuda_, path);
}

void DeviceContext::time_kernel_shapes() {
  if (cuda_ == nullptr) return;
  if constexpr (kCudaBuilt) cuda::time_kernel_shapes(*cuda_);
}

std::vector<std::string> DeviceContext::kernel_shape_picks() const {
  if (cuda_ == nullptr) return {};
  if constexpr (kCudaBuilt) return cuda::kernel_shape_picks(*cuda_);
  return {};
}

cuda::Resources& DeviceContext::cuda() const {
  if (cuda_ == nullptr) {
    base::fail("the DeviceContext of ", tensor::device_name(device_), " has no CUDA resources");
  }
  return *cuda_;
}

}  // namespace mds::ops
