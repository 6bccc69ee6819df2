#include "tasks/inference_comms.h"

#include <mpi.h>

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "dist/process_grid.h"

namespace mds::tasks {

namespace {

// One tag for the stage-to-stage messages: between two ranks they arrive in order.
constexpr int kHiddenTag = 61;

}  // namespace

void InferenceComms::share_from_head(tensor::Tensor data) const {
  if (replica != nullptr && replica->size() > 1) replica->broadcast(data, head_rank());
}

void InferenceComms::sum_over_replicas(tensor::Tensor data) const {
  if (dp != nullptr && dp->size() > 1) dp->all_reduce(data, dist::ReduceOp::kSum);
}

void InferenceComms::share_from_rank0(std::string& text) const {
  if (world == nullptr || world->size() == 1) return;
  std::int64_t size = static_cast<std::int64_t>(text.size());
  world->broadcast(tensor::Tensor(&size, tensor::DType::kInt64, {1}), 0);
  text.resize(static_cast<std::size_t>(size));
  if (size > 0) world->broadcast(tensor::Tensor(text.data(), tensor::DType::kUInt8, {size}), 0);
}

void InferenceComms::send_to_next_stage(tensor::Tensor data) const {
  if (last_stage()) base::fail("send_to_next_stage: the last pipeline stage has no next stage");
  pp->send(data, static_cast<int>(pp_rank + 1), kHiddenTag);
}

void InferenceComms::recv_from_previous_stage(tensor::Tensor data) const {
  if (first_stage()) {
    base::fail("recv_from_previous_stage: the first pipeline stage has no previous stage");
  }
  pp->recv(data, static_cast<int>(pp_rank - 1), kHiddenTag);
}

std::vector<float> InferenceComms::gather_vocab(std::vector<float> local, std::int64_t rows) const {
  if (tp_size == 1 || tp == nullptr) return local;
  const std::int64_t columns = rows > 0 ? static_cast<std::int64_t>(local.size()) / rows : 0;
  std::vector<float> gathered(local.size() * static_cast<std::size_t>(tp_size));
  tp->all_gather(tensor::Tensor(local.data(), tensor::DType::kFloat32,
                                {static_cast<std::int64_t>(local.size())}),
                 tensor::Tensor(gathered.data(), tensor::DType::kFloat32,
                                {static_cast<std::int64_t>(gathered.size())}));
  // [T, rows, V/T] → [rows, V].
  std::vector<float> full(gathered.size());
  for (std::int64_t rank = 0; rank < tp_size; ++rank) {
    for (std::int64_t row = 0; row < rows; ++row) {
      const float* from = gathered.data() + (rank * rows + row) * columns;
      std::copy(from, from + columns, full.data() + (row * tp_size + rank) * columns);
    }
  }
  return full;
}

dist::GridCommunicators inference_groups(dist::GridCommunicators host, tensor::Device device,
                                         dist::DeviceBackend backend, double timeout_s) {
  if (device.kind != tensor::DeviceKind::kCuda) return host;
  return dist::device_grid_communicators(std::move(host), backend, device, timeout_s);
}

InferenceProcesses::~InferenceProcesses() = default;

void InferenceProcesses::detect() {
  launch_ = dist::detect_launch(dist::process_env());
}

void InferenceProcesses::join(std::int64_t tp, std::int64_t pp, std::int64_t dp,
                              tensor::Device device, dist::DeviceBackend backend) {
  if (tp * pp * dp != world_size()) {
    base::fail("InferenceProcesses: a ", tp, " × ", pp, " × ", dp, " grid needs ", tp * pp * dp,
               " ranks, not ", world_size());
  }
  comms_ = InferenceComms{};
  comms_.tp_size = tp;
  comms_.pp_size = pp;
  comms_.dp_size = dp;
  if (world_size() == 1) return;
  const dist::EnvLookup env = dist::process_env();
  mpi_.emplace();
  world_ = dist::MpiCommunicator::world(dist::timeout_seconds_from_env(env, 300.0));
  dist::check_launch_matches_mpi(launch_, world_->rank(), world_->size());
  const dist::ProcessGrid grid(world_size(), static_cast<int>(tp), static_cast<int>(pp));
  groups_ = inference_groups(dist::make_grid_communicators(*world_, grid), device, backend,
                             world_->timeout_s());
  const dist::GridCoord coord = grid.coord_of(world_->rank());
  comms_.world = world_.get();
  comms_.tp = groups_.tp.get();
  comms_.pp = groups_.pp.get();
  comms_.replica = groups_.mp.get();
  comms_.dp = groups_.dp.get();
  comms_.embedding = groups_.embedding.get();
  comms_.tp_rank = coord.tp;
  comms_.pp_rank = coord.pp;
  comms_.dp_rank = coord.dp;
}

void InferenceProcesses::abort_job(int status) const {
  if (world_) MPI_Abort(MPI_COMM_WORLD, status);
}

}  // namespace mds::tasks
