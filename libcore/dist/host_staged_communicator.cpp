#include "dist/host_staged_communicator.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/buffer.h"
#include "tensor/device_memory.h"

namespace mds::dist {

using tensor::Tensor;

namespace detail {

// Host buffers kept between operations: a training step stages the same sizes every iteration.
class StagingPool {
 public:
  tensor::Buffer take(std::size_t bytes) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->bytes() >= bytes && (best == free_.end() || it->bytes() < best->bytes())) best = it;
    }
    if (best == free_.end()) return tensor::Buffer(bytes, tensor::Device{});
    tensor::Buffer buffer = std::move(*best);
    free_.erase(best);
    return buffer;
  }

  void give_back(tensor::Buffer buffer) {
    free_.push_back(std::move(buffer));
    if (free_.size() > kKept) free_.erase(free_.begin());  // the least recently returned
  }

 private:
  static constexpr std::size_t kKept = 8;
  std::vector<tensor::Buffer> free_;
};

}  // namespace detail

namespace {

bool on_host(const Tensor& t) {
  return t.device().kind == tensor::DeviceKind::kCpu;
}

void check_one_device(const Communicator& c, CommOp op, const Tensor& input, const Tensor& output) {
  if (!(input.device() == output.device())) {
    base::fail("dist: ", comm_op_name(op), " on group '", c.name(), "': input on ",
               tensor::device_name(input.device()), " and output on ",
               tensor::device_name(output.device()), "; both must be on one device");
  }
}

// The host copies of one operation's device tensors, and which of them go back when it completes.
class Staging {
 public:
  explicit Staging(std::shared_ptr<detail::StagingPool> pool) : pool_(std::move(pool)) {}

  // A host tensor shaped as `device`, holding its values when `copy_in`; copied back over
  // `device` when the operation completes if `copy_out`.
  Tensor stage(const Tensor& device, bool copy_in, bool copy_out) {
    buffers_.push_back(pool_->take(device.bytes()));
    const Tensor host = buffers_.back().as(device.dtype(), device.shape());
    if (copy_in) tensor::copy(host, device);
    if (copy_out) copy_back_.emplace_back(device, host);
    return host;
  }

  void finish() {
    for (const auto& [device, host] : copy_back_) tensor::copy(device, host);
    copy_back_.clear();
    for (tensor::Buffer& buffer : buffers_) pool_->give_back(std::move(buffer));
    buffers_.clear();
  }

 private:
  std::shared_ptr<detail::StagingPool> pool_;
  std::vector<tensor::Buffer> buffers_;
  std::vector<std::pair<Tensor, Tensor>> copy_back_;  // (device, host)
};

// The host operation on the staged tensors; the results go back to the device once it is done.
class StagedRequest final : public RequestImpl {
 public:
  StagedRequest(Request host, Staging staging)
      : host_(std::move(host)), staging_(std::move(staging)) {}

  void wait() override {
    host_.wait();
    finish();
  }
  bool test() override {
    if (!host_.test()) return false;
    finish();
    return true;
  }

 private:
  void finish() {
    if (finished_) return;
    finished_ = true;
    staging_.finish();
  }

  Request host_;
  Staging staging_;
  bool finished_ = false;
};

Request staged(Request host, Staging staging) {
  return Request(std::make_unique<StagedRequest>(std::move(host), std::move(staging)));
}

}  // namespace

HostStagedCommunicator::HostStagedCommunicator(std::unique_ptr<Communicator> host)
    : host_(std::move(host)), pool_(std::make_shared<detail::StagingPool>()) {
  if (!host_) base::fail("dist: HostStagedCommunicator needs a host communicator");
}

HostStagedCommunicator::~HostStagedCommunicator() = default;

const std::string& HostStagedCommunicator::name() const {
  return host_->name();
}
int HostStagedCommunicator::rank() const {
  return host_->rank();
}
int HostStagedCommunicator::size() const {
  return host_->size();
}
int HostStagedCommunicator::world_rank(int group_rank) const {
  return host_->world_rank(group_rank);
}
const CommStats& HostStagedCommunicator::stats() const {
  return host_->stats();
}
void HostStagedCommunicator::reset_stats() {
  host_->reset_stats();
}

Request HostStagedCommunicator::all_reduce_async(Tensor data, ReduceOp op) {
  if (on_host(data)) return host_->all_reduce_async(data, op);
  Staging staging(pool_);
  const Tensor host = staging.stage(data, true, true);
  return staged(host_->all_reduce_async(host, op), std::move(staging));
}

Request HostStagedCommunicator::reduce_async(Tensor data, ReduceOp op, int root) {
  if (on_host(data)) return host_->reduce_async(data, op, root);
  Staging staging(pool_);
  const bool is_root = rank() == root;
  const Tensor host = staging.stage(data, true, is_root);
  return staged(host_->reduce_async(host, op, root), std::move(staging));
}

Request HostStagedCommunicator::reduce_scatter_async(Tensor input, Tensor output, ReduceOp op) {
  check_one_device(*this, CommOp::kReduceScatter, input, output);
  if (on_host(input)) return host_->reduce_scatter_async(input, output, op);
  // Separate host copies: an output that aliases the input's slice is overwritten only by the
  // copy back, after the reduction read every slice.
  Staging staging(pool_);
  const Tensor host_input = staging.stage(input, true, false);
  const Tensor host_output = staging.stage(output, false, true);
  return staged(host_->reduce_scatter_async(host_input, host_output, op), std::move(staging));
}

Request HostStagedCommunicator::all_gather_async(Tensor input, Tensor output) {
  check_one_device(*this, CommOp::kAllGather, input, output);
  if (on_host(input)) return host_->all_gather_async(input, output);
  Staging staging(pool_);
  const Tensor host_input = staging.stage(input, true, false);
  const Tensor host_output = staging.stage(output, false, true);
  return staged(host_->all_gather_async(host_input, host_output), std::move(staging));
}

Request HostStagedCommunicator::broadcast_async(Tensor data, int root) {
  if (on_host(data)) return host_->broadcast_async(data, root);
  const bool is_root = rank() == root;
  Staging staging(pool_);
  const Tensor host = staging.stage(data, is_root, !is_root);
  return staged(host_->broadcast_async(host, root), std::move(staging));
}

Request HostStagedCommunicator::send_async(Tensor data, int peer, int tag) {
  if (on_host(data)) return host_->send_async(data, peer, tag);
  Staging staging(pool_);
  const Tensor host = staging.stage(data, true, false);
  return staged(host_->send_async(host, peer, tag), std::move(staging));
}

Request HostStagedCommunicator::recv_async(Tensor data, int peer, int tag) {
  if (on_host(data)) return host_->recv_async(data, peer, tag);
  Staging staging(pool_);
  const Tensor host = staging.stage(data, false, true);
  return staged(host_->recv_async(host, peer, tag), std::move(staging));
}

Request HostStagedCommunicator::barrier_async() {
  return host_->barrier_async();
}

}  // namespace mds::dist
