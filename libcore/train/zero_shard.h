// One data-parallel rank's share of the optimizer in BF16_Optimizer and ZeRO stages 1 and 2
// (training.md §4.3–§4.6): the fp32 master weights, Adam moments and gradients of its partition
// of every flat group, and the collectives that bring reduced gradients in and send updated
// weights out. Model weights stay whole on every rank (ZeRO ≤ 2); only this state is 1/D.
//
// The partition buffers hold the groups back to back: group g at group_offset(g), each
// partition_numel long (padding included, zero). That is the layout of the checkpoint's
// single_partition_of_fp32_groups and base-optimizer state.
//
// With a CUDA DeviceContext the buffers (the flat-group scratch and the all-gather staging too)
// live on its device and every pass below runs there; the data-parallel group must then take
// device tensors (dist::device_grid_communicators).
#pragma once

#include <cstddef>
#include <cstdint>

#include "dist/communicator.h"
#include "model/param_table.h"
#include "ops/adam.h"
#include "ops/device_context.h"
#include "tensor/buffer.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "train/zero_partition.h"

namespace mds::train {

class ZeroShard {
 public:
  // `data_parallel` may be null (one rank). The table, the communicator and `device` (null: the
  // host) must outlive the shard. Buffers start zeroed.
  ZeroShard(const model::ParamTable& table, dist::Communicator* data_parallel,
            const ops::DeviceContext* device = nullptr);

  const ZeroLayout& layout() const { return layout_; }
  std::int64_t rank() const { return rank_; }
  std::int64_t dp_size() const { return layout_.dp_size(); }
  std::int64_t group_offset(std::size_t group) const;
  // Group `group`'s slice of one of the partition buffers below.
  tensor::Tensor group_slice(tensor::Tensor partitions, std::size_t group) const;

  // fp32 [layout().partition_numel()] each.
  tensor::Tensor master() const { return master_; }
  tensor::Tensor exp_avg() const { return exp_avg_; }
  tensor::Tensor exp_avg_sq() const { return exp_avg_sq_; }
  tensor::Tensor grads() const { return grads_; }

  // master = this rank's partitions of `params_flat` (a table-layout buffer), widened.
  void master_from_params(tensor::Tensor params_flat);
  // grads = this rank's partitions of fully reduced gradients (table layout, fp32).
  void grads_from_full(tensor::Tensor grads_flat);

  // ZeRO's reduction: each flat group of `grads_flat` (table layout, fp32 or fp16) is cast to
  // `comm_dtype`, divided by D, SUM-reduce-scattered over the data-parallel group, and this
  // rank's partition is added into `accumulator` (a partition buffer of fp32 or fp16, rounded as
  // accumulate_gradient does with `grad_dtype`). Upstream stage 1 all-reduces the whole group and
  // keeps its slice; the reduce-scatter gives the same sums with half the bytes.
  void reduce_scatter_into(tensor::Tensor grads_flat, tensor::DType comm_dtype,
                           tensor::Tensor accumulator, tensor::DType grad_dtype);

  // Σ g² over the parameter elements of group `group` in grads(): TP duplicates count on TP rank
  // 0 only and the last stage's tied replica not at all (ZeRO's get_grad_norm_direct). The local
  // part of a norm whose sums are then reduced over DP and model parallel.
  double group_sum_of_squares(std::size_t group) const;

  // apex FusedAdam on every group's partition of master() with grads(), at `step`.
  void adam_step(double lr, double beta1, double beta2, double eps, double weight_decay,
                 std::int64_t step);

  // params = master rounded to params' dtype, gathered from every rank (§4.6); `params_flat` is
  // the table-layout weight buffer every rank keeps whole.
  void publish(tensor::Tensor params_flat);
  // adam_step then publish, with 16-bit params rounded in the Adam pass itself
  // (ops::adamw_step_and_cast, bit-identical to the two calls).
  void adam_step_and_publish(double lr, double beta1, double beta2, double eps, double weight_decay,
                             std::int64_t step, tensor::Tensor params_flat);

 private:
  const ops::DeviceContext& context() const { return device_ != nullptr ? *device_ : host_ctx_; }
  tensor::Tensor allocate(tensor::Buffer& buffer, tensor::DType dtype, std::int64_t numel);
  ops::AdamWConfig adam_config(std::size_t group, double lr, double beta1, double beta2, double eps,
                               double weight_decay) const;
  // From this rank's rounded partition of `flat` (the whole group in params' dtype) to params.
  void gather_into_params(tensor::Tensor flat, std::size_t group, tensor::Tensor params_flat);
  // §4.6 in place: every rank's partition of `flat` (the whole group) from its owner.
  void all_gather_group(tensor::Tensor flat, const ZeroGroup& group);
  // The whole flat group `group` in `dtype`, from a scratch buffer.
  tensor::Tensor flat_scratch(tensor::DType dtype, std::size_t group);

  ZeroLayout layout_;
  dist::Communicator* data_parallel_;
  const ops::DeviceContext* device_;  // null: host_ctx_
  ops::DeviceContext host_ctx_;
  std::int64_t rank_ = 0;
  std::int64_t largest_group_ = 0;
  tensor::Buffer master_buffer_, exp_avg_buffer_, exp_avg_sq_buffer_, grads_buffer_;
  tensor::Buffer flat_buffer_, partition_fp32_buffer_;
  // The bucketed all-gather's landing area, grown to the largest bucket on first use.
  tensor::Buffer gather_staging_buffer_;
  tensor::Tensor master_, exp_avg_, exp_avg_sq_, grads_;
};

}  // namespace mds::train
