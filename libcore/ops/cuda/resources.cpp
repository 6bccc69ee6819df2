#include "ops/cuda/resources.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/check.h"
#include "ops/cuda/backend.h"
#include "tensor/device_memory.h"

namespace mds::ops::cuda {
namespace {

// Checks that the device exists and makes it current, before the members that allocate on it.
int select_device(int index) {
  const int count = tensor::cuda_device_count();
  if (index < 0 || index >= count) {
    base::fail("cannot run on cuda:", index, ": this process sees ", count, " CUDA device",
               count == 1 ? "" : "s");
  }
  kernels::check_cuda(cudaSetDevice(index), "cudaSetDevice");
  return index;
}

}  // namespace

Resources::Resources(int device_index, bool tf32) : device(select_device(device_index)) {
  gemm.set_fp32_math(tf32 ? kernels::GemmMath::kTf32 : kernels::GemmMath::kFp32);
  kernels::check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  // The scratch buffers grow through the stream-ordered pool (cudaMallocAsync), and kernels called
  // without one (tests, benchmarks) take theirs from it per call. With the default release
  // threshold of 0 the pool hands freed memory back to the driver at every synchronization and
  // maps it again on the next allocation; keeping it makes those allocations reuse. The pool then
  // holds at most their peak.
  cudaMemPool_t pool = nullptr;
  kernels::check_cuda(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  std::uint64_t keep_all = UINT64_MAX;
  kernels::check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all),
                      "cudaMemPoolSetAttribute (release threshold)");
}

Resources::~Resources() {
  // Destructors report nothing: a failure here (at process exit) has no one to tell.
  (void)cudaSetDevice(device);
  (void)cudaStreamSynchronize(stream);
  (void)cudaStreamDestroy(stream);
}

Resources* create_resources(int device_index, bool tf32) {
  return new Resources(device_index, tf32);
}

void destroy_resources(Resources* resources) noexcept {
  delete resources;
}

void tune_gemms(Resources& resources, const std::string& path) {
  kernels::check_cuda(cudaSetDevice(resources.device), "cudaSetDevice");
  auto choices = std::make_unique<GemmTuningFile>(path, kernels::gemm_platform());
  resources.gemm.set_algorithm_choices(choices.get());
  resources.gemm_choices = std::move(choices);
}

void time_kernel_shapes(Resources& resources) {
  if (resources.kernel_shapes == nullptr) {
    resources.kernel_shapes = std::make_unique<LaunchVariantChoices>();
  }
}

std::vector<std::string> kernel_shape_picks(const Resources& resources) {
  std::vector<std::string> lines;
  if (resources.kernel_shapes == nullptr) return lines;
  for (const LaunchVariantChoices::Pick& pick : resources.kernel_shapes->picks()) {
    lines.push_back(describe(pick));
  }
  return lines;
}

void synchronize(const DeviceContext& ctx) {
  kernels::check_cuda(cudaStreamSynchronize(stream_of(ctx)), "DeviceContext::synchronize");
}

}  // namespace mds::ops::cuda
