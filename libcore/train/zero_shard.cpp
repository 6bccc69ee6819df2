#include "train/zero_shard.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "ops/adam.h"
#include "ops/elementwise.h"
#include "ops/gradients.h"
#include "train/grad_accumulation.h"

namespace mds::train {

using tensor::DType;
using tensor::Tensor;
using Slot = CollectiveStaging::Slot;

std::int64_t zero_chunk_numel(const ZeroLayout& layout, const CollectiveStaging& staging) {
  std::int64_t largest_partition = 0;
  for (const ZeroGroup& group : layout.groups()) {
    largest_partition = std::max(largest_partition, group.partition_numel);
  }
  return std::min(staging.per_rank_chunk(layout.dp_size()), largest_partition);
}

ZeroShard::ZeroShard(const model::ParamTable& table, dist::Communicator* data_parallel,
                     CollectiveStaging& staging, const ops::DeviceContext* device)
    : layout_(table, data_parallel != nullptr ? data_parallel->size() : 1),
      data_parallel_(data_parallel != nullptr && data_parallel->size() > 1 ? data_parallel
                                                                           : nullptr),
      staging_(&staging),
      device_(device),
      rank_(data_parallel != nullptr ? data_parallel->rank() : 0) {
  const std::int64_t n = layout_.partition_numel();
  master_ = allocate(master_buffer_, n);
  exp_avg_ = allocate(exp_avg_buffer_, n);
  exp_avg_sq_ = allocate(exp_avg_sq_buffer_, n);
}

Tensor ZeroShard::allocate(tensor::Buffer& buffer, std::int64_t numel) {
  buffer = tensor::Buffer(static_cast<std::size_t>(std::max<std::int64_t>(numel, 1)) *
                              tensor::dtype_size(DType::kFloat32),
                          context().device());
  return buffer.as(DType::kFloat32, tensor::Shape{numel});
}

std::size_t ZeroShard::state_bytes() const {
  return master_buffer_.bytes() + exp_avg_buffer_.bytes() + exp_avg_sq_buffer_.bytes();
}

std::int64_t ZeroShard::group_offset(std::size_t group) const {
  std::int64_t offset = 0;
  for (std::size_t g = 0; g < group; ++g) offset += layout_[g].partition_numel;
  return offset;
}

void ZeroShard::check_partitions(const char* what, Tensor partitions) const {
  if (partitions.numel() != layout_.partition_numel()) {
    base::fail("ZeroShard: ", what, " has ", partitions.numel(), " elements, expected ",
               layout_.partition_numel());
  }
}

Tensor ZeroShard::group_slice(Tensor partitions, std::size_t group) const {
  check_partitions("a partition buffer", partitions);
  return partitions.reshape(tensor::Shape{partitions.numel()})
      .narrow(group_offset(group), layout_[group].partition_numel);
}

void ZeroShard::master_from_params(Tensor params_flat) {
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    gather_partition(context(), params_flat, layout_, g, rank_, group_slice(master_, g));
  }
}

void ZeroShard::grads_from_full(Tensor grads_flat, Tensor grads, float factor) const {
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    gather_partition(context(), grads_flat, layout_, g, rank_, group_slice(grads, g), factor);
  }
}

template <typename Reduced>
void ZeroShard::for_each_reduced_chunk(Tensor grads_flat, DType comm_dtype, Reduced&& reduced) {
  const std::int64_t d = dp_size();
  const std::int64_t per_rank = staging_->per_rank_chunk(d);
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    const ZeroGroup& group = layout_[g];
    for_each_chunk(group.partition_numel, per_rank, [&](const Chunk& chunk) {
      // The chunk's slice of every rank's partition, rank after rank: a reduce-scatter of this
      // buffer leaves each rank its own slice reduced, exactly as one of the whole flat group.
      const Tensor gathered = staging_->get(Slot::kCollective, comm_dtype, d * chunk.numel);
      for (std::int64_t r = 0; r < d; ++r) {
        to_flat_range(context(), grads_flat, layout_, g, group.partition_begin(r) + chunk.offset,
                      gathered.narrow(r * chunk.numel, chunk.numel));
      }
      const Tensor own = gathered.narrow(rank_ * chunk.numel, chunk.numel);
      if (data_parallel_ != nullptr) {
        divide_in_dtype(context(), gathered, static_cast<double>(d));
        data_parallel_->reduce_scatter(gathered, own, dist::ReduceOp::kSum);
      }
      if (comm_dtype == DType::kFloat32) {
        reduced(g, chunk, own);
        return;
      }
      const Tensor widened = staging_->get(Slot::kWidened, DType::kFloat32, chunk.numel);
      ops::cast(context(), widened, own);
      reduced(g, chunk, widened);
    });
  }
}

void ZeroShard::reduce_scatter_into(Tensor grads_flat, DType comm_dtype, Tensor accumulator,
                                    DType grad_dtype) {
  check_partitions("the accumulator", accumulator);
  for_each_reduced_chunk(
      grads_flat, comm_dtype, [&](std::size_t g, const Chunk& chunk, Tensor reduced) {
        accumulate_gradient(context(),
                            group_slice(accumulator, g).narrow(chunk.offset, chunk.numel), reduced,
                            grad_dtype);
      });
}

void ZeroShard::reduce_scatter_fresh(Tensor grads_flat, DType comm_dtype, DType accumulator_dtype,
                                     DType grad_dtype, Tensor grads) {
  check_partitions("the gradients", grads);
  for_each_reduced_chunk(
      grads_flat, comm_dtype, [&](std::size_t g, const Chunk& chunk, Tensor reduced) {
        const Tensor out = group_slice(grads, g).narrow(chunk.offset, chunk.numel);
        // An fp32 accumulator is the gradient chunk itself; a 16-bit one passes through the
        // staging and is widened after its rounding.
        const Tensor accumulator =
            accumulator_dtype == DType::kFloat32
                ? out
                : staging_->get(Slot::kAccumulator, accumulator_dtype, chunk.numel);
        ops::fill(context(), accumulator, 0.0f);
        accumulate_gradient(context(), accumulator, reduced, grad_dtype);
        if (accumulator_dtype != DType::kFloat32) ops::cast(context(), out, accumulator);
      });
}

void ZeroShard::all_reduce_parameter(Tensor partitions, std::size_t param,
                                     dist::Communicator& group) {
  check_partitions("the partitions", partitions);
  const std::int64_t numel = layout_.table()[param].local_numel();
  // A multiple of both group sizes: every chunk but the last splits evenly over either.
  const std::int64_t chunk_numel = staging_->all_reduce_chunk(dp_size() * group.size());
  for_each_chunk(numel, chunk_numel, [&](const Chunk& chunk) {
    const Tensor whole = staging_->get(Slot::kCollective, partitions.dtype(), chunk.numel);
    // The pieces of this rank's fragments of `param` that fall into the chunk.
    const auto for_each_piece = [&](auto&& action) {
      for (std::size_t g = 0; g < layout_.size(); ++g) {
        for (const ZeroFragment& f : layout_[g].fragments[static_cast<std::size_t>(rank_)]) {
          if (f.param != param) continue;
          const std::int64_t first = std::max(f.param_offset, chunk.offset);
          const std::int64_t last = std::min(f.param_offset + f.numel, chunk.offset + chunk.numel);
          if (first >= last) continue;
          action(
              group_slice(partitions, g).narrow(f.hp_start + first - f.param_offset, last - first),
              whole.narrow(first - chunk.offset, last - first));
        }
      }
    };
    ops::fill(context(), whole, 0.0f);
    for_each_piece([&](Tensor partition, Tensor part) { ops::cast(context(), part, partition); });
    if (data_parallel_ != nullptr) data_parallel_->all_reduce(whole, dist::ReduceOp::kSum);
    group.all_reduce(whole, dist::ReduceOp::kSum);
    for_each_piece([&](Tensor partition, Tensor part) { ops::cast(context(), partition, part); });
  });
}

double ZeroShard::group_sum_of_squares(Tensor grads, std::size_t group) const {
  const model::ParamTable& table = layout_.table();
  std::vector<ops::SquaresSegment> segments;
  for (const ZeroFragment& fragment : layout_[group].fragments[static_cast<std::size_t>(rank_)]) {
    const model::ParamSpec& param = table[fragment.param];
    if (param.tied_replica || !table.counts_in_norm(param)) continue;
    segments.push_back({fragment.hp_start, fragment.numel});
  }
  double sum = 0.0;
  for (const double part : ops::sums_of_squares(context(), group_slice(grads, group), segments)) {
    sum += part;
  }
  return sum;
}

ops::AdamWConfig ZeroShard::adam_config(std::size_t group, const ShardAdamStep& adam) const {
  ops::AdamWConfig config;
  config.lr = static_cast<float>(adam.lr);
  config.beta1 = static_cast<float>(adam.beta1);
  config.beta2 = static_cast<float>(adam.beta2);
  config.eps = static_cast<float>(adam.eps);
  config.weight_decay = layout_[group].decay_group == model::DecayGroup::kNoDecay
                            ? 0.0f
                            : static_cast<float>(adam.weight_decay);
  return config;
}

void ZeroShard::adam_step(Tensor grads, const ShardAdamStep& adam) {
  check_partitions("the gradients", grads);
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    ops::adamw_step(context(), group_slice(master_, g), group_slice(grads, g),
                    group_slice(exp_avg_, g), group_slice(exp_avg_sq_, g), adam_config(g, adam),
                    adam.step);
  }
}

template <typename Fill>
void ZeroShard::for_each_published_chunk(Tensor params_flat, Fill&& fill) {
  const std::int64_t d = dp_size();
  const std::int64_t per_rank = staging_->per_rank_chunk(d);
  for (std::size_t g = 0; g < layout_.size(); ++g) {
    const ZeroGroup& group = layout_[g];
    for_each_chunk(group.partition_numel, per_rank, [&](const Chunk& chunk) {
      // Rank r's rounded slice lands at r·chunk: the all-gather (in place) fills in the others',
      // each of which is the chunk of its owner's partition of the flat group (§4.6).
      const Tensor gathered =
          staging_->get(Slot::kCollective, params_flat.dtype(), d * chunk.numel);
      const Tensor own = gathered.narrow(rank_ * chunk.numel, chunk.numel);
      fill(g, chunk, own);
      if (data_parallel_ != nullptr) data_parallel_->all_gather(own, gathered);
      for (std::int64_t r = 0; r < d; ++r) {
        from_flat_range(context(), gathered.narrow(r * chunk.numel, chunk.numel), layout_, g,
                        group.partition_begin(r) + chunk.offset, params_flat);
      }
    });
  }
}

void ZeroShard::publish(Tensor params_flat) {
  for_each_published_chunk(params_flat, [&](std::size_t g, const Chunk& chunk, Tensor own) {
    ops::cast(context(), own, group_slice(master_, g).narrow(chunk.offset, chunk.numel));
  });
}

void ZeroShard::adam_step_and_publish(Tensor grads, const ShardAdamStep& adam, Tensor params_flat) {
  if (params_flat.dtype() == DType::kFloat32) {  // nothing to round: the plain step and a copy
    adam_step(grads, adam);
    publish(params_flat);
    return;
  }
  check_partitions("the gradients", grads);
  for_each_published_chunk(params_flat, [&](std::size_t g, const Chunk& chunk, Tensor own) {
    const auto part = [&](Tensor partitions) {
      return group_slice(partitions, g).narrow(chunk.offset, chunk.numel);
    };
    ops::adamw_step_and_cast(context(), part(master_), part(grads), part(exp_avg_),
                             part(exp_avg_sq_), adam_config(g, adam), adam.step, own);
  });
}

}  // namespace mds::train
