#include "train/zero_shard.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "ops/adam.h"
#include "ops/elementwise.h"
#include "ops/gradients.h"
#include "tensor/device_memory.h"
#include "train/grad_accumulation.h"

namespace mds::train {

using tensor::DType;
using tensor::Tensor;

ZeroShard::ZeroShard(const model::ParamTable& table, dist::Communicator* data_parallel,
                     const ops::DeviceContext* device)
    : layout_(table, data_parallel != nullptr ? data_parallel->size() : 1),
      data_parallel_(data_parallel != nullptr && data_parallel->size() > 1 ? data_parallel
                                                                           : nullptr),
      device_(device),
      rank_(data_parallel != nullptr ? data_parallel->rank() : 0) {
  for (const ZeroGroup& group : layout_.groups()) {
    largest_group_ = std::max(largest_group_, group.aligned_numel);
  }
  const std::int64_t n = layout_.partition_numel();
  master_ = allocate(master_buffer_, DType::kFloat32, n);
  exp_avg_ = allocate(exp_avg_buffer_, DType::kFloat32, n);
  exp_avg_sq_ = allocate(exp_avg_sq_buffer_, DType::kFloat32, n);
  grads_ = allocate(grads_buffer_, DType::kFloat32, n);
  // Room for the largest flat group in the widest dtype, and one fp32 partition of it.
  flat_buffer_ = tensor::Buffer(
      static_cast<std::size_t>(std::max<std::int64_t>(largest_group_, 1)) * sizeof(float),
      context().device());
  partition_fp32_buffer_ = tensor::Buffer(
      static_cast<std::size_t>(std::max<std::int64_t>(largest_group_ / dp_size(), 1)) *
          sizeof(float),
      context().device());
}

Tensor ZeroShard::allocate(tensor::Buffer& buffer, DType dtype, std::int64_t numel) {
  buffer = tensor::Buffer(
      static_cast<std::size_t>(std::max<std::int64_t>(numel, 1)) * tensor::dtype_size(dtype),
      context().device());
  return buffer.as(dtype, tensor::Shape{numel});
}

Tensor ZeroShard::flat_scratch(DType dtype, std::size_t group) {
  return flat_buffer_.as(dtype, tensor::Shape{layout_[group].aligned_numel});
}

std::int64_t ZeroShard::group_offset(std::size_t group) const {
  std::int64_t offset = 0;
  for (std::size_t g = 0; g < group; ++g) offset += layout_[g].partition_numel;
  return offset;
}

Tensor ZeroShard::group_slice(Tensor partitions, std::size_t group) const {
  if (partitions.numel() != layout_.partition_numel()) {
    base::fail("ZeroShard: a partition buffer has ", partitions.numel(), " elements, expected ",
               layout_.partition_numel());
  }
  return partitions.reshape(tensor::Shape{partitions.numel()})
      .narrow(group_offset(group), layout_[group].partition_numel);
}

void ZeroShard::master_from_params(Tensor params_flat) {
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    gather_partition(context(), params_flat, layout_, g, rank_, group_slice(master_, g));
  }
}

void ZeroShard::grads_from_full(Tensor grads_flat) {
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    gather_partition(context(), grads_flat, layout_, g, rank_, group_slice(grads_, g));
  }
}

void ZeroShard::reduce_scatter_into(Tensor grads_flat, DType comm_dtype, Tensor accumulator,
                                    DType grad_dtype) {
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    const ZeroGroup& group = layout_[g];
    const Tensor flat = flat_scratch(comm_dtype, g);
    to_flat_group(context(), grads_flat, layout_, g, flat);
    const Tensor own = flat.narrow(group.partition_begin(rank_), group.partition_numel);
    if (data_parallel_ != nullptr) {
      divide_in_dtype(context(), flat, static_cast<double>(dp_size()));
      data_parallel_->reduce_scatter(flat, own, dist::ReduceOp::kSum);
    }
    const Tensor widened =
        partition_fp32_buffer_.as(DType::kFloat32, tensor::Shape{group.partition_numel});
    ops::cast(context(), widened, own);
    accumulate_gradient(context(), group_slice(accumulator, g), widened, grad_dtype);
  }
}

double ZeroShard::group_sum_of_squares(std::size_t group) const {
  const model::ParamTable& table = layout_.table();
  std::vector<ops::SquaresSegment> segments;
  for (const ZeroFragment& fragment : layout_[group].fragments[static_cast<std::size_t>(rank_)]) {
    const model::ParamSpec& param = table[fragment.param];
    if (param.tied_replica || !table.counts_in_norm(param)) continue;
    segments.push_back({fragment.hp_start, fragment.numel});
  }
  double sum = 0.0;
  for (const double part : ops::sums_of_squares(context(), group_slice(grads_, group), segments)) {
    sum += part;
  }
  return sum;
}

ops::AdamWConfig ZeroShard::adam_config(std::size_t group, double lr, double beta1, double beta2,
                                        double eps, double weight_decay) const {
  ops::AdamWConfig config;
  config.lr = static_cast<float>(lr);
  config.beta1 = static_cast<float>(beta1);
  config.beta2 = static_cast<float>(beta2);
  config.eps = static_cast<float>(eps);
  config.weight_decay = layout_[group].decay_group == model::DecayGroup::kNoDecay
                            ? 0.0f
                            : static_cast<float>(weight_decay);
  return config;
}

void ZeroShard::adam_step(double lr, double beta1, double beta2, double eps, double weight_decay,
                          std::int64_t step) {
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    ops::adamw_step(context(), group_slice(master_, g), group_slice(grads_, g),
                    group_slice(exp_avg_, g), group_slice(exp_avg_sq_, g),
                    adam_config(g, lr, beta1, beta2, eps, weight_decay), step);
  }
}

void ZeroShard::adam_step_and_publish(double lr, double beta1, double beta2, double eps,
                                      double weight_decay, std::int64_t step, Tensor params_flat) {
  if (params_flat.dtype() == DType::kFloat32) {  // nothing to round: the plain step and a copy
    adam_step(lr, beta1, beta2, eps, weight_decay, step);
    publish(params_flat);
    return;
  }
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    const ZeroGroup& group = layout_[g];
    const Tensor flat = flat_scratch(params_flat.dtype(), g);
    ops::adamw_step_and_cast(context(), group_slice(master_, g), group_slice(grads_, g),
                             group_slice(exp_avg_, g), group_slice(exp_avg_sq_, g),
                             adam_config(g, lr, beta1, beta2, eps, weight_decay), step,
                             flat.narrow(group.partition_begin(rank_), group.partition_numel));
    gather_into_params(flat, g, params_flat);
  }
}

void ZeroShard::all_gather_group(Tensor flat, const ZeroGroup& group) {
  const std::int64_t begin = group.partition_begin(rank_);
  const std::vector<GatherShard> shards = allgather_shards(group.partition_numel, dp_size());
  if (shards.size() == 1) {
    data_parallel_->all_gather(flat.narrow(begin, group.partition_numel), flat);
    return;
  }
  // Several buckets: each gathers the same-offset slice of every partition, which is not one
  // contiguous range of the flat group, so it lands in a staging tensor first.
  for (const GatherShard& shard : shards) {
    const std::size_t bytes =
        static_cast<std::size_t>(shard.numel * dp_size()) * tensor::dtype_size(flat.dtype());
    if (gather_staging_buffer_.bytes() < bytes) {
      gather_staging_buffer_ = tensor::Buffer(bytes, context().device());
    }
    const Tensor gathered =
        gather_staging_buffer_.as(flat.dtype(), tensor::Shape{shard.numel * dp_size()});
    data_parallel_->all_gather(flat.narrow(begin + shard.offset, shard.numel), gathered);
    for (std::int64_t r = 0; r < dp_size(); ++r) {
      ops::cast(context(), flat.narrow(group.partition_begin(r) + shard.offset, shard.numel),
                gathered.narrow(r * shard.numel, shard.numel));
    }
  }
}

void ZeroShard::gather_into_params(Tensor flat, std::size_t group, Tensor params_flat) {
  if (data_parallel_ != nullptr) all_gather_group(flat, layout_[group]);
  from_flat_group(context(), flat, layout_, group, params_flat);
}

void ZeroShard::publish(Tensor params_flat) {
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    const ZeroGroup& group = layout_[g];
    const Tensor flat = flat_scratch(params_flat.dtype(), g);
    ops::cast(context(), flat.narrow(group.partition_begin(rank_), group.partition_numel),
              group_slice(master_, g));
    gather_into_params(flat, g, params_flat);
  }
}

}  // namespace mds::train
