#pragma once
#include <string_view>

#include "dist/grid_communicators.h"
#include "tensor/tensor.h"

namespace mds::dist {

// How the communicators of ranks training on CUDA devices move device tensors (Megatron's
// --distributed-backend): NCCL, or staged through the host MPI communicators ("gloo": exact left
// fold, and the only choice when ranks share a GPU). Host runs always use MPI.
enum class DeviceBackend { kNccl, kHostStaged };

// "nccl" or "gloo"; anything else fails with one line naming the choices.
DeviceBackend parse_device_backend(std::string_view name);

// Wraps every communicator of `host` for device tensors on `device` (host tensors still go to the
// host ones). Collective over every group, in one order on every rank. Groups of one rank are
// always HostStagedCommunicator (nothing crosses ranks there, so no NCCL communicator is made).
// kNccl fails with one line in a build without CUDA and when two ranks of a group share a GPU.
GridCommunicators device_grid_communicators(GridCommunicators host, DeviceBackend backend,
                                            tensor::Device device, double timeout_s);

}  // namespace mds::dist
