#pragma once
#include "dist/communicator.h"
#include "tensor/tensor.h"

namespace mds::model {

// The collectives of Megatron's tensor-parallel regions (training.md §2.3) over this rank's TP
// group. Without a group (or with one rank) every call is a no-op, so the T = 1 model runs the
// same code.
class TensorParallel {
 public:
  TensorParallel() = default;
  explicit TensorParallel(dist::Communicator* group) : group_(group) {}

  bool active() const { return group_ != nullptr && group_->size() > 1; }
  int size() const { return group_ != nullptr ? group_->size() : 1; }

  // Σ over the TP ranks in place: `g` in the forward (after a row-parallel GEMM or the
  // vocab-parallel lookup), `f` in the backward (into a column-parallel GEMM's input).
  void sum(tensor::Tensor data) const {
    if (active()) group_->all_reduce(data, dist::ReduceOp::kSum);
  }
  void max(tensor::Tensor data) const {
    if (active()) group_->all_reduce(data, dist::ReduceOp::kMax);
  }

 private:
  dist::Communicator* group_ = nullptr;
};

}  // namespace mds::model
