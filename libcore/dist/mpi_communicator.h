#pragma once
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "dist/launch.h"

namespace mds::dist {

namespace detail {
struct CommState;
class ProgressEngine;
}  // namespace detail

// Initializes MPI for the lifetime of the object (unless something else already did) and
// finalizes it at the end. Destroy every communicator before the session.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

// Communicator for host memory over MPI. Collectives are built from nonblocking point-to-point
// transfers: reductions send every slice straight to the rank that owns it, which folds the
// contributions in rank order (deterministic, see Communicator), then the owners send their reduced
// slices to everyone. Every wait polls with a deadline (timeout_s) and, once it passes, prints one
// line naming group, operation and the peer waited for, then calls MPI_Abort.
// Not thread-safe: one thread of a process talks to MPI.
class MpiCommunicator final : public Communicator {
 public:
  // A duplicate of MPI_COMM_WORLD named "world". Needs an MpiSession.
  static std::unique_ptr<MpiCommunicator> world(double timeout_s);

  // Collective over this communicator: ranks passing the same color form one group, ordered by
  // key; a negative color joins no group and gets nullptr. Runs a barrier (with the timeout)
  // first, so a rank that never arrives is named instead of hanging inside MPI.
  std::unique_ptr<MpiCommunicator> split(std::string name, int color, int key);

  ~MpiCommunicator() override;

  const std::string& name() const override;
  int rank() const override;
  int size() const override;
  int world_rank(int group_rank) const override;
  double timeout_s() const;

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
  // send_async and recv_async (kind kSend or kRecv).
  Request point_to_point_async(CommOp kind, tensor::Tensor data, int peer, int tag);
  MpiCommunicator(std::shared_ptr<detail::CommState> state,
                  std::shared_ptr<detail::ProgressEngine> engine);

  std::shared_ptr<detail::CommState> state_;
  std::shared_ptr<detail::ProgressEngine> engine_;
};

// detect_launch(env) checked against this MPI world (see check_launch_matches_mpi).
LaunchInfo detect_and_check_launch(const MpiCommunicator& world, const EnvLookup& env);

}  // namespace mds::dist
