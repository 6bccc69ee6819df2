#include "dist/communicator.h"

#include <algorithm>

#include "base/error.h"

namespace mds::dist {

std::string_view comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce:
      return "all_reduce";
    case CommOp::kReduceScatter:
      return "reduce_scatter";
    case CommOp::kAllGather:
      return "all_gather";
    case CommOp::kBroadcast:
      return "broadcast";
    case CommOp::kSend:
      return "send";
    case CommOp::kRecv:
      return "recv";
    case CommOp::kBarrier:
      return "barrier";
    case CommOp::kReduce:
      return "reduce";
  }
  return "?";
}

std::uint64_t CommStats::total_bytes() const {
  std::uint64_t total = 0;
  for (const std::uint64_t b : bytes_sent) total += b;
  return total;
}

double CommStats::total_seconds() const {
  double total = 0.0;
  for (const double s : wait_seconds) total += s;
  return total;
}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->wait();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Request::~Request() {
  if (impl_) impl_->wait();
}

void Request::wait() {
  if (!impl_) return;
  impl_->wait();
  impl_.reset();
}

bool Request::test() {
  if (!impl_) return true;
  if (!impl_->test()) return false;
  impl_.reset();
  return true;
}

Chunk all_reduce_chunk(std::int64_t count, int ranks, int index) {
  const std::int64_t base = count / ranks;
  const std::int64_t extra = count % ranks;
  const std::int64_t i = index;
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

void check_reduce_dtype(std::string_view group, CommOp op, tensor::DType dtype) {
  using tensor::DType;
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kBFloat16:
    case DType::kFloat16:
    case DType::kInt64:
    case DType::kInt32:
      return;
    default:
      base::fail("dist: ", comm_op_name(op), " on group '", group, "' cannot reduce dtype ",
                 tensor::dtype_name(dtype));
  }
}

void check_same_dtype(std::string_view group, CommOp op, const tensor::Tensor& a,
                      const tensor::Tensor& b) {
  if (a.dtype() != b.dtype()) {
    base::fail("dist: ", comm_op_name(op), " on group '", group, "': input dtype ",
               tensor::dtype_name(a.dtype()), " differs from output dtype ",
               tensor::dtype_name(b.dtype()));
  }
}

}  // namespace mds::dist
