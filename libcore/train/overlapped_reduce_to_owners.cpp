#include "train/overlapped_reduce_to_owners.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "ops/elementwise.h"
#include "train/grad_accumulation.h"
#include "train/zero_partition.h"

namespace mds::train {
OverlappedReduceToOwners::OverlappedReduceToOwners(
    const model::ParamTable& table, const ZeroShard& shard, dist::Communicator& group,
    CollectiveStaging& staging, const ops::DeviceContext& ctx, tensor::DType comm_dtype,
    std::int64_t chunk_numel, int slots)
    : runs_(table),
      shard_(&shard),
      group_(&group),
      staging_(&staging),
      ctx_(&ctx),
      comm_dtype_(comm_dtype),
      chunk_numel_(chunk_numel),
      places_(table.size()) {
  if (group.size() < 2 || chunk_numel < 1 || slots < 1) {
    base::fail("OverlappedReduceToOwners: needs a group of at least 2 ranks, a chunk and a slot");
  }
  const ZeroLayout& layout = shard.layout();
  for (std::size_t g = 0; g < layout.size(); ++g) {
    for (std::size_t k = 0; k < layout[g].params.size(); ++k) {
      places_[layout[g].params[k]] = {g, layout[g].flat_offsets[k]};
    }
  }
  const std::size_t bytes = pool_bytes(comm_dtype, chunk_numel, 1);
  for (int s = 0; s < slots; ++s) {
    pool_.emplace_back(bytes, ctx.device());
    free_slots_.push_back(s);
  }
}

std::size_t OverlappedReduceToOwners::pool_bytes(tensor::DType comm_dtype, std::int64_t chunk_numel,
                                                 int slots) {
  return static_cast<std::size_t>(slots) * static_cast<std::size_t>(chunk_numel) *
         tensor::dtype_size(comm_dtype);
}

std::size_t OverlappedReduceToOwners::bytes() const {
  std::size_t total = 0;
  for (const tensor::Buffer& buffer : pool_) total += buffer.bytes();
  return total;
}

tensor::Tensor OverlappedReduceToOwners::slot_view(int slot, std::int64_t numel) const {
  return pool_[static_cast<std::size_t>(slot)].as(comm_dtype_, tensor::Shape{numel});
}

void OverlappedReduceToOwners::begin(tensor::Tensor micro, tensor::Tensor accumulator,
                                     tensor::DType grad_dtype) {
  if (in_progress_) base::fail("OverlappedReduceToOwners: begin() during a reduction");
  micro_ = micro;
  accumulator_ = accumulator;
  grad_dtype_ = grad_dtype;
  runs_.reset();
  in_progress_ = true;
}

void OverlappedReduceToOwners::ready(std::span<const std::size_t> params) {
  if (!in_progress_) base::fail("OverlappedReduceToOwners: ready() outside a reduction");
  for (const GradientRuns::Run& run : runs_.ready(params, chunk_numel_)) start(run);
  for (Piece& piece : in_flight_) piece.request.test();  // MPI advances only in test/wait
}

void OverlappedReduceToOwners::finish() {
  if (!in_progress_) base::fail("OverlappedReduceToOwners: finish() outside a reduction");
  for (const GradientRuns::Run& run : runs_.rest()) start(run);
  while (!in_flight_.empty()) retire_oldest();
  in_progress_ = false;
}

// The run's parameters, consecutive in their flat groups: one flat range per group.
void OverlappedReduceToOwners::start(const GradientRuns::Run& run) {
  const model::ParamTable& table = shard_->layout().table();
  std::size_t group = 0;
  std::int64_t begin = 0, end = 0;
  for (std::size_t piece = run.first; piece < run.end; ++piece) {
    const std::size_t param = runs_.param(piece);
    const Place& place = places_[param];
    if (end > begin && place.group != group) {
      send(group, begin, end - begin, -1);
      begin = end = 0;
    }
    if (end == begin) {
      group = place.group;
      begin = place.flat_offset;
    }
    end = place.flat_offset + table[param].local_numel();
  }
  if (end > begin) send(group, begin, end - begin, -1);
}

// Flat range [flat_begin, flat_begin + numel) of group `group`, cut at the partitions (owner -1:
// each piece to the rank whose partition holds it) and into chunks.
void OverlappedReduceToOwners::send(std::size_t group, std::int64_t flat_begin, std::int64_t numel,
                                    int owner) {
  const ZeroGroup& zero_group = shard_->layout()[group];
  const std::int64_t ps = zero_group.partition_numel;
  if (owner < 0) {
    for (std::int64_t r = 0; r < zero_group.dp_size(); ++r) {
      const std::int64_t lo = std::max(flat_begin, r * ps);
      const std::int64_t hi = std::min(flat_begin + numel, (r + 1) * ps);
      if (lo < hi) send(group, lo, hi - lo, static_cast<int>(r));
    }
    return;
  }
  for_each_chunk(numel, chunk_numel_, [&](const Chunk& chunk) {
    if (free_slots_.empty()) retire_oldest();
    Piece piece;
    piece.group = group;
    piece.flat_begin = flat_begin + chunk.offset;
    piece.numel = chunk.numel;
    piece.owner = owner;
    piece.slot = free_slots_.back();
    free_slots_.pop_back();
    const tensor::Tensor packed = slot_view(piece.slot, piece.numel);
    to_flat_range(*ctx_, micro_, shard_->layout(), group, piece.flat_begin, packed);
    divide_in_dtype(*ctx_, packed, static_cast<double>(group_->size()));
    piece.request = group_->reduce_async(packed, dist::ReduceOp::kSum, owner);
    in_flight_.push_back(std::move(piece));
  });
}

void OverlappedReduceToOwners::retire_oldest() {
  Piece piece = std::move(in_flight_.front());
  in_flight_.pop_front();
  piece.request.wait();
  if (piece.owner == group_->rank()) {
    const tensor::Tensor reduced = slot_view(piece.slot, piece.numel);
    tensor::Tensor widened = reduced;
    if (comm_dtype_ != tensor::DType::kFloat32) {
      widened =
          staging_->get(CollectiveStaging::Slot::kWidened, tensor::DType::kFloat32, piece.numel);
      ops::cast(*ctx_, widened, reduced);
    }
    const std::int64_t hp_start =
        piece.flat_begin - piece.owner * shard_->layout()[piece.group].partition_numel;
    accumulate_gradient(
        *ctx_, shard_->group_slice(accumulator_, piece.group).narrow(hp_start, piece.numel),
        widened, grad_dtype_);
  }
  free_slots_.push_back(piece.slot);
}

}  // namespace mds::train
