#pragma once
#include <memory>
#include <string>

#include "dist/communicator.h"

namespace mds::dist {

namespace detail {
class StagingPool;
}  // namespace detail

// Communicator for tensors in CUDA memory over a host communicator (the MPI one): a device tensor
// is copied into a host staging buffer, the host operation runs on that buffer, and the result is
// copied back once the operation completes (in the wait(), or the test() that finds it done).
// Host tensors go straight to the host communicator. Megatron's --distributed-backend gloo on a
// device, and the backend for ranks that share one GPU (which NCCL refuses).
//
// Reductions are the host communicator's, so the Communicator contract holds unchanged: the exact
// left fold in group-rank order, bit-identical on every rank. Copies are tensor::copy, through
// CUDA's legacy default stream: a device tensor's pending writes from any blocking stream land
// before it is staged, and the result is in place for work queued after wait() returns.
// Both tensors of a two-tensor operation must be on one device. stats() are the host
// communicator's (the copies are not in wait_seconds). Not thread-safe, as the host one is not.
class HostStagedCommunicator final : public Communicator {
 public:
  explicit HostStagedCommunicator(std::unique_ptr<Communicator> host);
  ~HostStagedCommunicator() override;
  HostStagedCommunicator(const HostStagedCommunicator&) = delete;
  HostStagedCommunicator& operator=(const HostStagedCommunicator&) = delete;

  const std::string& name() const override;
  int rank() const override;
  int size() const override;
  int world_rank(int group_rank) const override;

  Request all_reduce_async(tensor::Tensor data, ReduceOp op) override;
  Request reduce_async(tensor::Tensor data, ReduceOp op, int root) override;
  Request reduce_scatter_async(tensor::Tensor input, tensor::Tensor output, ReduceOp op) override;
  Request all_gather_async(tensor::Tensor input, tensor::Tensor output) override;
  Request broadcast_async(tensor::Tensor data, int root) override;
  Request send_async(tensor::Tensor data, int peer, int tag) override;
  Request recv_async(tensor::Tensor data, int peer, int tag) override;
  Request barrier_async() override;

  const CommStats& stats() const override;
  void reset_stats() override;

 private:
  std::unique_ptr<Communicator> host_;
  std::shared_ptr<detail::StagingPool> pool_;
};

}  // namespace mds::dist
