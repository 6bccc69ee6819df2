#include "dist/device_communicators.h"

#include <memory>
#include <utility>

#include "base/error.h"
#include "dist/host_staged_communicator.h"
#include "dist/nccl_communicator.h"
#include "tensor/device_memory.h"

namespace mds::dist {

DeviceBackend parse_device_backend(std::string_view name) {
  if (name == "nccl") return DeviceBackend::kNccl;
  if (name == "gloo") return DeviceBackend::kHostStaged;
  base::fail("--distributed-backend must be nccl or gloo, got '", name, "'");
}

namespace {

std::unique_ptr<Communicator> for_device(std::unique_ptr<Communicator> host, DeviceBackend backend,
                                         tensor::Device device, double timeout_s) {
  if (!host) return nullptr;
  // A group of one rank moves nothing: no NCCL communicator (its buffers and threads) for it.
  if (backend == DeviceBackend::kHostStaged || host->size() == 1) {
    return std::make_unique<HostStagedCommunicator>(std::move(host));
  }
  if constexpr (tensor::kCudaBuilt) {
    return make_nccl_communicator(std::move(host), device, timeout_s);
  } else {
    base::fail(
        "--distributed-backend nccl: this build has no CUDA backend (BUILD_CUDA=OFF), so no "
        "NCCL; group '",
        host->name(), "' cannot move tensors on ", tensor::device_name(device));
  }
}

}  // namespace

GridCommunicators device_grid_communicators(GridCommunicators host, DeviceBackend backend,
                                            tensor::Device device, double timeout_s) {
  if (device.kind != tensor::DeviceKind::kCuda) {
    base::fail("dist: device communicators need a CUDA device, got ", tensor::device_name(device));
  }
  GridCommunicators out;
  out.tp = for_device(std::move(host.tp), backend, device, timeout_s);
  out.dp = for_device(std::move(host.dp), backend, device, timeout_s);
  out.pp = for_device(std::move(host.pp), backend, device, timeout_s);
  out.mp = for_device(std::move(host.mp), backend, device, timeout_s);
  out.embedding = for_device(std::move(host.embedding), backend, device, timeout_s);
  return out;
}

}  // namespace mds::dist
