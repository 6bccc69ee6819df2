#pragma once
#include <memory>

#include "dist/communicator.h"
#include "tensor/tensor.h"

namespace mds::dist {

// A Communicator for tensors in CUDA memory over NCCL (Megatron's --distributed-backend nccl),
// one NCCL communicator per group, bootstrapped through `host` (the group's MPI communicator):
// group rank 0's ncclUniqueId is broadcast over it. Collective over `host`; every rank of the group
// passes its own `device`. Host tensors go straight to `host`.
//
// Device operations run on a CUDA stream of the communicator's own, after everything already
// queued on CUDA's legacy default stream (which waits for every blocking stream, as the
// DeviceContext streams are); a Request is a CUDA event on that stream, and wait() polls it with
// the `timeout_s` deadline, failing with one line naming the group and operation (after aborting
// the NCCL communicator) when it passes. Point-to-point messages between two ranks are matched in
// the order they were started, whatever their tags (NCCL has no tags).
//
// The determinism contract is RELAXED here: NCCL's sums follow its ring or tree algorithm, not the
// left fold in group-rank order. The result is the same on every rank and from run to run for a
// fixed topology, algorithm and protocol (NCCL_ALGO, NCCL_PROTO), but not bit-equal to the fold;
// use --distributed-backend gloo (HostStagedCommunicator) for that. MAX may not propagate NaN.
// CommStats count calls and message bytes as the MPI communicator does, and bytes_sent by the same
// formulas (docs/parallelism.md), which is what a ring moves for all_reduce, reduce_scatter and
// all_gather; stats() adds the host operations'.
//
// NCCL refuses two ranks of one group on one GPU: construction fails with one line saying so.
// libnccl.so.2 is opened at run time (dist/cuda/nccl_library.h): a missing library is a one-line
// error here, not a program that cannot start.
// Defined only in builds with BUILD_CUDA (tensor::kCudaBuilt); call it under `if constexpr`.
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host,
                                                     tensor::Device device, double timeout_s);

}  // namespace mds::dist
