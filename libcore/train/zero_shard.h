// One data-parallel rank's share of the optimizer in BF16_Optimizer and ZeRO stages 1 and 2
// (training.md §4.3–§4.6): the fp32 master weights and Adam moments of its partition of every flat
// group, and the collectives that bring reduced gradients in and send updated weights out. Model
// weights stay whole on every rank (ZeRO ≤ 2); only this state is 1/D.
//
// The partition buffers hold the groups back to back: group g at group_offset(g), each
// partition_numel long (padding included, zero). That is the layout of the checkpoint's
// single_partition_of_fp32_groups and base-optimizer state.
//
// The fp32 gradient partitions a step reads are not kept here: the caller passes them (`grads`,
// partition_numel() elements in the same layout), so that it can lend memory that is free
// during the step (the optimizer lends its micro-batch gradient buffer). The collectives move
// their data through a CollectiveStaging, one bounded chunk at a time, never a whole flat group.
//
// With a CUDA DeviceContext the buffers live on its device and every pass below runs there; the
// staging must be on that device and the data-parallel group must take device tensors
// (dist::device_grid_communicators).
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
#include "train/collective_staging.h"
#include "train/zero_partition.h"

namespace mds::train {

// Adam's settings for one step of every group (the no-decay group takes no weight decay).
struct ShardAdamStep {
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  std::int64_t step = 1;  // already incremented
};

// The elements of one rank's slice of a chunked ZeRO collective: the staging's per-rank chunk,
// or the largest partition of `layout` when that is smaller (no call asks for more).
std::int64_t zero_chunk_numel(const ZeroLayout& layout, const CollectiveStaging& staging);

class ZeroShard {
 public:
  // `data_parallel` may be null (one rank). The table, the communicator, `staging` and `device`
  // (null: the host) must outlive the shard. Buffers start zeroed.
  ZeroShard(const model::ParamTable& table, dist::Communicator* data_parallel,
            CollectiveStaging& staging, const ops::DeviceContext* device = nullptr);

  const ZeroLayout& layout() const { return layout_; }
  std::int64_t rank() const { return rank_; }
  std::int64_t dp_size() const { return layout_.dp_size(); }
  std::int64_t group_offset(std::size_t group) const;
  // Group `group`'s slice of a partition buffer (master(), a gradient or accumulator partition).
  tensor::Tensor group_slice(tensor::Tensor partitions, std::size_t group) const;

  // fp32 [layout().partition_numel()] each.
  tensor::Tensor master() const { return master_; }
  tensor::Tensor exp_avg() const { return exp_avg_; }
  tensor::Tensor exp_avg_sq() const { return exp_avg_sq_; }
  // Bytes of master, exp_avg and exp_avg_sq.
  std::size_t state_bytes() const;

  // master = this rank's partitions of `params_flat` (a table-layout buffer), widened.
  void master_from_params(tensor::Tensor params_flat);
  // grads = this rank's partitions of fully reduced gradients (table layout, fp32), times
  // `factor` (the clipping coefficient; the fp32 product, as scale_gradients gives it).
  void grads_from_full(tensor::Tensor grads_flat, tensor::Tensor grads, float factor = 1.0f) const;

  // ZeRO's reduction: each flat group of `grads_flat` (table layout, fp32 or fp16) is cast to
  // `comm_dtype`, divided by D, SUM-reduce-scattered over the data-parallel group, and this
  // rank's partition is added into `accumulator` (a partition buffer of fp32 or fp16, rounded as
  // accumulate_gradient does with `grad_dtype`). Upstream stage 1 all-reduces the whole group and
  // keeps its slice; the reduce-scatter gives the same sums with half the bytes.
  void reduce_scatter_into(tensor::Tensor grads_flat, tensor::DType comm_dtype,
                           tensor::Tensor accumulator, tensor::DType grad_dtype);
  // The same reduction into a fresh accumulator of `accumulator_dtype` (all zeros, as stage 1's
  // is at every boundary), widened into `grads` (fp32 partitions): each chunk's accumulation
  // passes through the staging, so no partition-sized accumulator is kept.
  void reduce_scatter_fresh(tensor::Tensor grads_flat, tensor::DType comm_dtype,
                            tensor::DType accumulator_dtype, tensor::DType grad_dtype,
                            tensor::Tensor grads);
  // Pipeline ReduceTiedGrads at stage 2: the elements of table parameter `param` in
  // `partitions` (a partition buffer, e.g. the gradient accumulator) summed over every rank of
  // the data-parallel group and then over `group`, chunk by chunk. The partitions of two stages
  // cut the parameter at different places, so each chunk is made whole over DP first (every
  // element has one owner, the others add zeros: exact), summed, and put back.
  void all_reduce_parameter(tensor::Tensor partitions, std::size_t param,
                            dist::Communicator& group);

  // Σ g² over the parameter elements of group `group` of `grads`: TP duplicates count on TP rank
  // 0 only and the last stage's tied replica not at all (ZeRO's get_grad_norm_direct). The local
  // part of a norm whose sums are then reduced over DP and model parallel.
  double group_sum_of_squares(tensor::Tensor grads, std::size_t group) const;

  // apex FusedAdam on every group's partition of master() with `grads`.
  void adam_step(tensor::Tensor grads, const ShardAdamStep& adam);

  // params = master rounded to params' dtype, gathered from every rank (§4.6); `params_flat` is
  // the table-layout weight buffer every rank keeps whole.
  void publish(tensor::Tensor params_flat);
  // adam_step then publish, with 16-bit params rounded in the Adam pass itself
  // (ops::adamw_step_and_cast, bit-identical to the two calls).
  void adam_step_and_publish(tensor::Tensor grads, const ShardAdamStep& adam,
                             tensor::Tensor params_flat);

 private:
  const ops::DeviceContext& context() const { return device_ != nullptr ? *device_ : host_ctx_; }
  tensor::Tensor allocate(tensor::Buffer& buffer, std::int64_t numel);
  ops::AdamWConfig adam_config(std::size_t group, const ShardAdamStep& adam) const;
  void check_partitions(const char* what, tensor::Tensor partitions) const;
  // For every chunk of every group's partition: the chunk of each rank's partition of
  // `grads_flat` in `comm_dtype`, ÷ D and reduce-scattered; reduced(group, chunk, own) gets this
  // rank's reduced chunk in fp32.
  template <typename Reduced>
  void for_each_reduced_chunk(tensor::Tensor grads_flat, tensor::DType comm_dtype,
                              Reduced&& reduced);
  // For every chunk of every group's partition: fill(group, chunk, own) writes this rank's
  // chunk in params' dtype, which is then gathered from every rank into `params_flat`.
  template <typename Fill>
  void for_each_published_chunk(tensor::Tensor params_flat, Fill&& fill);

  ZeroLayout layout_;
  dist::Communicator* data_parallel_;
  CollectiveStaging* staging_;
  const ops::DeviceContext* device_;  // null: host_ctx_
  ops::DeviceContext host_ctx_;
  std::int64_t rank_ = 0;
  tensor::Buffer master_buffer_, exp_avg_buffer_, exp_avg_sq_buffer_;
  tensor::Tensor master_, exp_avg_, exp_avg_sq_;
};

}  // namespace mds::train
