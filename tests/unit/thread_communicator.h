// An in-process Communicator for tests whose ranks run on threads: buffered sends, receives that
// wait (and fail after Mailboxes::patience, a minute, instead of hanging the test), collectives
// built from them. Every member of a group shares one Mailboxes.
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "dist/communicator.h"
#include "dist/reduce.h"

namespace mds::test {

struct Mailboxes {
  std::mutex mutex;
  std::condition_variable arrived;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<unsigned char>>> queues;
  std::chrono::seconds patience{60};  // how long a receive waits before it fails
};

class ThreadCommunicator final : public dist::Communicator {
 public:
  ThreadCommunicator(std::string name, std::shared_ptr<Mailboxes> mail, int rank, int size)
      : name_(std::move(name)), mail_(std::move(mail)), rank_(rank), size_(size) {}

  const std::string& name() const override { return name_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int world_rank(int group_rank) const override { return group_rank; }

  dist::Request send_async(tensor::Tensor data, int peer, int tag) override {
    const auto* bytes = static_cast<const unsigned char*>(data.raw());
    {
      std::lock_guard lock(mail_->mutex);
      mail_->queues[{rank_, peer, tag}].emplace_back(bytes, bytes + data.bytes());
    }
    mail_->arrived.notify_all();
    return {};
  }
  dist::Request recv_async(tensor::Tensor data, int peer, int tag) override {
    std::unique_lock lock(mail_->mutex);
    auto& queue = mail_->queues[{peer, rank_, tag}];
    if (!mail_->arrived.wait_for(lock, mail_->patience, [&] { return !queue.empty(); })) {
      base::fail(name_, " rank ", rank_, ": nothing from rank ", peer, " with tag ", tag);
    }
    if (queue.front().size() != data.bytes()) base::fail(name_, ": message of the wrong size");
    std::memcpy(data.raw(), queue.front().data(), data.bytes());
    queue.pop_front();
    return {};
  }
  dist::Request broadcast_async(tensor::Tensor data, int root) override {
    if (rank_ == root) {
      for (int peer = 0; peer < size_; ++peer) {
        if (peer != root) send_async(data, peer, kBroadcast);
      }
    } else {
      recv_async(data, root, kBroadcast);
    }
    return {};
  }
  // Sums and maxima folded in rank order as the real communicators do; 16-bit floats through
  // dist::reduce_into (rounded at every step, as MpiCommunicator's).
  dist::Request all_reduce_async(tensor::Tensor data, dist::ReduceOp op) override {
    switch (data.dtype()) {
      case tensor::DType::kFloat32:
        return fold<float>(data, op);
      case tensor::DType::kFloat64:
        return fold<double>(data, op);
      case tensor::DType::kInt64:
        return fold<std::int64_t>(data, op);
      case tensor::DType::kBFloat16:
      case tensor::DType::kFloat16:
        return fold_16bit(data, op);
      default:
        base::fail(name_, ": fp32, fp64, int64, bf16 and fp16 reductions only");
    }
  }
  // Every other rank sends its data to the root, which folds all in rank order (as all_reduce).
  dist::Request reduce_async(tensor::Tensor data, dist::ReduceOp op, int root) override {
    if (rank_ != root) {
      send_async(data, root, kReduceToRoot);
      return {};
    }
    std::vector<unsigned char> own(data.bytes()), part(data.bytes());
    std::memcpy(own.data(), data.raw(), own.size());
    for (int peer = 0; peer < size_; ++peer) {
      const unsigned char* x = own.data();
      if (peer != rank_) {
        recv_async(tensor::Tensor(part.data(), data.dtype(), data.shape()), peer, kReduceToRoot);
        x = part.data();
      }
      if (peer == 0) {
        std::memcpy(data.raw(), x, data.bytes());
      } else {
        dist::reduce_into(data.dtype(), op, data.raw(), x, data.numel());
      }
    }
    return {};
  }
  dist::Request all_gather_async(tensor::Tensor input, tensor::Tensor output) override {
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_) send_async(input, peer, kGather);
    }
    const std::size_t slice = input.bytes();
    if (output.bytes() != slice * static_cast<std::size_t>(size_)) {
      base::fail(name_, ": all_gather output of the wrong size");
    }
    auto* out = static_cast<unsigned char*>(output.raw());
    for (int peer = 0; peer < size_; ++peer) {
      const tensor::Tensor part(out + slice * static_cast<std::size_t>(peer), input.dtype(),
                                input.shape());
      if (peer == rank_) {
        std::memmove(part.raw(), input.raw(), slice);
      } else {
        recv_async(part, peer, kGather);
      }
    }
    return {};
  }
  // The rank-order fold of every rank's whole input, of which this rank keeps its slice.
  dist::Request reduce_scatter_async(tensor::Tensor input, tensor::Tensor output,
                                     dist::ReduceOp op) override {
    if (input.bytes() != output.bytes() * static_cast<std::size_t>(size_)) {
      base::fail(name_, ": reduce_scatter input of the wrong size");
    }
    std::vector<unsigned char> whole(input.bytes());
    std::memcpy(whole.data(), input.raw(), whole.size());
    all_reduce_async(tensor::Tensor(whole.data(), input.dtype(), input.shape()), op);
    std::memcpy(output.raw(), whole.data() + output.bytes() * static_cast<std::size_t>(rank_),
                output.bytes());
    return {};
  }
  dist::Request barrier_async() override { return unused(); }
  const dist::CommStats& stats() const override { return stats_; }
  void reset_stats() override {}

 private:
  // Every rank sends its data to every other one and folds all contributions in rank order, so
  // all ranks get the same result (the Communicator contract).
  template <typename T>
  dist::Request fold(tensor::Tensor data, dist::ReduceOp op) {
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_) send_async(data, peer, kReduce);
    }
    const auto values = data.host_span<T>();
    const std::vector<T> own(values.begin(), values.end());
    std::vector<T> result(own.size(), T{}), part(own.size());
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_)
        recv_async(tensor::Tensor(part.data(), data.dtype(), data.shape()), peer, kReduce);
      const std::vector<T>& x = peer == rank_ ? own : part;
      for (std::size_t i = 0; i < result.size(); ++i) {
        if (peer == 0) {
          result[i] = x[i];
        } else {
          result[i] = op == dist::ReduceOp::kSum ? result[i] + x[i] : std::max(result[i], x[i]);
        }
      }
    }
    std::copy(result.begin(), result.end(), values.begin());
    return {};
  }

  dist::Request fold_16bit(tensor::Tensor data, dist::ReduceOp op) {
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_) send_async(data, peer, kReduce);
    }
    const auto* bytes = static_cast<const unsigned char*>(data.raw());
    const std::vector<unsigned char> own(bytes, bytes + data.bytes());
    std::vector<unsigned char> result(own.size()), part(own.size());
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_)
        recv_async(tensor::Tensor(part.data(), data.dtype(), data.shape()), peer, kReduce);
      const std::vector<unsigned char>& x = peer == rank_ ? own : part;
      if (peer == 0) {
        result = x;
      } else {
        dist::reduce_into(data.dtype(), op, result.data(), x.data(), data.numel());
      }
    }
    std::memcpy(data.raw(), result.data(), result.size());
    return {};
  }

  static constexpr int kBroadcast = 30000, kReduce = 30001, kGather = 30002, kReduceToRoot = 30003;
  dist::Request unused() const { base::fail(name_, ": operation not used by these tests"); }

  std::string name_;
  std::shared_ptr<Mailboxes> mail_;
  int rank_, size_;
  dist::CommStats stats_;
};

}  // namespace mds::test
