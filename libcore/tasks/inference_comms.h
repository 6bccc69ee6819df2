// The processes of an evaluate or generate run: one, or a T × P × D grid of ranks under
// mpirun/srun holding D model replicas of T × P ranks (rank = pp·T·D + dp·T + tp, Megatron's
// order, as ProcessGrid numbers it). On CUDA devices the groups move device tensors (the TP sums,
// the hidden states between stages) over NCCL or staged through MPI, as pretrain's do.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/device_communicators.h"
#include "dist/grid_communicators.h"
#include "dist/launch.h"
#include "dist/mpi_communicator.h"
#include "tensor/tensor.h"

namespace mds::tasks {

// This rank's place in the grid and the groups it talks over (not owned). The default is one
// process: T = P = 1, every exchange a no-op.
struct InferenceComms {
  dist::Communicator* world = nullptr;
  dist::Communicator* tp = nullptr;
  dist::Communicator* pp = nullptr;
  dist::Communicator* replica = nullptr;    // the T × P ranks of this model replica
  dist::Communicator* dp = nullptr;         // the same (tp, pp) place in every replica
  dist::Communicator* embedding = nullptr;  // the first and last stage of this TP rank (P > 1)
  std::int64_t tp_size = 1, tp_rank = 0, pp_size = 1, pp_rank = 0, dp_size = 1, dp_rank = 0;

  bool first_stage() const { return pp_rank == 0; }
  bool last_stage() const { return pp_rank == pp_size - 1; }
  // Global rank 0 (replica 0's first stage, TP rank 0) prints and writes the results.
  bool output_rank() const { return pp_rank == 0 && tp_rank == 0 && dp_rank == 0; }
  // The rank of its replica whose decisions (sampled tokens, scores) the replica follows: the
  // last stage's TP rank 0, which has the logits and the losses (a rank of `replica`).
  int head_rank() const { return static_cast<int>((pp_size - 1) * tp_size); }
  bool is_head() const { return last_stage() && tp_rank == 0; }

  // Every rank of the replica gets its head rank's `data` (any dtype).
  void share_from_head(tensor::Tensor data) const;
  // In place: the sum of `data` (float64 or int64) over the D replicas, added in replica order
  // (the same on every rank); a no-op with one replica.
  void sum_over_replicas(tensor::Tensor data) const;
  // Every rank gets rank 0's `text` (what only rank 0 can read: standard input, a terminal).
  void share_from_rank0(std::string& text) const;
  // The hidden states between pipeline stages (same shape on both sides).
  void send_to_next_stage(tensor::Tensor data) const;
  void recv_from_previous_stage(tensor::Tensor data) const;
  // Logits of this TP rank's vocabulary rows, [rows, V/T], joined over the TP group into
  // [rows, V] on every TP rank (rank r's columns at [r·V/T, (r+1)·V/T)).
  std::vector<float> gather_vocab(std::vector<float> local, std::int64_t rows) const;
};

// The groups a grid of ranks running on `device` talks over: the host (MPI) groups unchanged for
// a host run; for a CUDA device each wrapped for device tensors by `backend`
// (dist::device_grid_communicators: NCCL, or staged through MPI), host tensors still going over
// MPI. Collective over every group on a device.
dist::GridCommunicators inference_groups(dist::GridCommunicators host, tensor::Device device,
                                         dist::DeviceBackend backend, double timeout_s);

// Owns the MPI session and the communicators behind an InferenceComms.
class InferenceProcesses {
 public:
  InferenceProcesses() = default;
  InferenceProcesses(const InferenceProcesses&) = delete;
  InferenceProcesses& operator=(const InferenceProcesses&) = delete;
  ~InferenceProcesses();

  // Reads the launcher's rank and world size from the environment (mpirun, srun, torchrun
  // variables; none: one process). Nothing is joined yet.
  void detect();
  int rank() const { return launch_.rank; }
  int world_size() const { return launch_.world_size; }
  int local_rank() const { return launch_.local_rank; }
  int local_size() const { return launch_.local_size; }
  bool output_rank() const { return launch_.rank == 0; }

  // With world_size() > 1, joins MPI and builds the groups of a tp × pp × dp grid, which must
  // have world_size() ranks, for a run on `device` (inference_groups).
  void join(std::int64_t tp, std::int64_t pp, std::int64_t dp = 1, tensor::Device device = {},
            dist::DeviceBackend backend = dist::DeviceBackend::kNccl);
  const InferenceComms& comms() const { return comms_; }
  // Stops every rank of a joined job (after this rank failed, so that no peer waits for it);
  // returns without doing anything on one process.
  void abort_job(int status) const;

 private:
  dist::LaunchInfo launch_;
  std::optional<dist::MpiSession> mpi_;
  std::unique_ptr<dist::MpiCommunicator> world_;
  dist::GridCommunicators groups_;
  InferenceComms comms_;
};

}  // namespace mds::tasks
