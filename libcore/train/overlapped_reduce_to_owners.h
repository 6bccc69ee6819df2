// ZeRO stage 2's per-micro-batch reduction started while that micro-batch's backward still runs
// (DeepSpeed's overlap_comm at stage 2, whose gradient hooks reduce each bucket to the ranks that
// own it). As the backward reports parameters final (train/gradient_runs.h), every run that holds
// a bucket is cut along the data-parallel partitions of each flat group (train/zero_partition.h):
// the piece in rank r's partition is packed in the communication dtype, divided by D and reduced
// to rank r (Communicator::reduce_async), at most `chunk_numel` elements a call. finish() waits for
// every piece, and the owner adds its reduced pieces (widened to fp32) into its partition
// accumulator with accumulate_gradient's rounding: element for element what ZeroShard's
// reduce-scatter of the whole micro-batch does, so the bits are the same with the MPI
// communicators. The flat groups' alignment padding is never sent: it stays zero.
//
// The packed pieces wait in a fixed pool of `slots` buffers of chunk_numel elements; when all are
// in flight, the oldest piece is finished before another is packed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "dist/communicator.h"
#include "model/param_table.h"
#include "ops/device_context.h"
#include "tensor/buffer.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "train/collective_staging.h"
#include "train/gradient_runs.h"
#include "train/zero_shard.h"

namespace mds::train {

// Packed pieces in flight at once (the pool's slots).
inline constexpr int kOverlapSlots = 4;

class OverlappedReduceToOwners {
 public:
  // The shard (its layout, rank and group), the staging (for the widened slot), `ctx` and the
  // group outlive this; `group` has at least 2 ranks. `chunk_numel`, the most elements a piece
  // takes, is ZeRO's chunk (zero_chunk_numel). The pool is allocated here.
  OverlappedReduceToOwners(const model::ParamTable& table, const ZeroShard& shard,
                           dist::Communicator& group, CollectiveStaging& staging,
                           const ops::DeviceContext& ctx, tensor::DType comm_dtype,
                           std::int64_t chunk_numel, int slots);

  // Bytes of the pool (what plan_optimizer_memory counts as overlap_staging).
  static std::size_t pool_bytes(tensor::DType comm_dtype, std::int64_t chunk_numel, int slots);
  std::size_t bytes() const;

  bool in_progress() const { return in_progress_; }
  // A micro-batch's reduction into `accumulator` (this rank's partitions, fp32 or fp16) of the
  // fp32 table-layout gradients `micro`, rounded with `grad_dtype`.
  void begin(tensor::Tensor micro, tensor::Tensor accumulator, tensor::DType grad_dtype);
  void ready(std::span<const std::size_t> params);
  // The backward is over: the rest is reduced, every piece waited for and accumulated.
  void finish();

 private:
  struct Piece {
    std::size_t group = 0;
    std::int64_t flat_begin = 0;  // in the flat group
    std::int64_t numel = 0;
    int owner = 0;
    int slot = 0;
    dist::Request request;
  };
  // Where each table parameter sits in its flat group.
  struct Place {
    std::size_t group = 0;
    std::int64_t flat_offset = 0;
  };

  void start(const GradientRuns::Run& run);
  void send(std::size_t group, std::int64_t flat_begin, std::int64_t numel, int owner);
  // Waits for the oldest piece and, on its owner, adds it into the accumulator.
  void retire_oldest();
  tensor::Tensor slot_view(int slot, std::int64_t numel) const;

  GradientRuns runs_;
  const ZeroShard* shard_;
  dist::Communicator* group_;
  CollectiveStaging* staging_;
  const ops::DeviceContext* ctx_;
  tensor::DType comm_dtype_;
  std::int64_t chunk_numel_;
  std::vector<Place> places_;  // by table index
  std::vector<tensor::Buffer> pool_;
  std::vector<int> free_slots_;
  std::deque<Piece> in_flight_;
  bool in_progress_ = false;
  tensor::Tensor micro_, accumulator_;
  tensor::DType grad_dtype_ = tensor::DType::kFloat32;
};

}  // namespace mds::train
