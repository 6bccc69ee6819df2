// The bounded scratch the optimizer's gradient and weight collectives go through (the stage-0
// all-reduce, ZeRO's reduce-scatter, the all-gather of the updated weights, ReduceTiedGrads at
// stage 2). Each collective moves its data in chunks of at most chunk_numel() elements per call,
// so no scratch and no communicator buffer grows with the model: every pass around a chunk is
// element-wise (casts, the ÷ D, the rounded accumulation, AdamW) and the collectives fold each
// element over the ranks in the same order whatever the chunk, so the results are bit-identical
// to moving a whole flat group at once (with the MPI communicators; NCCL's order may depend on
// the message size).
//
// Three slots, grown on first use to the largest request and kept: the collective's own buffer,
// an fp32 widening of a chunk, and a chunk of a 16-bit gradient accumulator. They live on the
// device of the buffers they serve.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/buffer.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace mds::train {

// 4 Mi elements: a 16 MiB fp32 (8 MiB 16-bit) collective; at most 40 MiB of scratch in all.
inline constexpr std::int64_t kDefaultCollectiveChunk = std::int64_t{1} << 22;

// One piece [offset, offset + numel) of a range cut into chunks.
struct Chunk {
  std::int64_t offset = 0;
  std::int64_t numel = 0;
};

class CollectiveStaging {
 public:
  enum class Slot { kCollective, kWidened, kAccumulator };

  // chunk_numel >= 2; the slots live on `device`.
  CollectiveStaging(std::int64_t chunk_numel, tensor::Device device);

  std::int64_t chunk_numel() const { return chunk_numel_; }
  // The elements each of `ranks` contributes to one reduce-scatter or all-gather chunk (the
  // collective then holds ranks times that): even, so that 16-bit slices start 4-byte aligned as
  // NCCL wants, and at least 2.
  std::int64_t per_rank_chunk(std::int64_t ranks) const;
  // The elements of one all-reduce chunk: a multiple of 2·ranks, so that every chunk but the
  // last splits evenly over the ranks and the bytes sent equal those of one whole all-reduce.
  std::int64_t all_reduce_chunk(std::int64_t ranks) const;

  // A 1-D view of `numel` elements of `dtype` in `slot`, which grows to fit. Views of a slot
  // alias each other: one chunk at a time.
  tensor::Tensor get(Slot slot, tensor::DType dtype, std::int64_t numel);
  // Bytes the three slots hold now.
  std::size_t bytes() const;

 private:
  std::int64_t chunk_numel_;
  tensor::Device device_;
  tensor::Buffer slots_[3];
};

// [0, total) cut into consecutive chunks of `chunk` elements, the last one shorter.
template <typename Action>
void for_each_chunk(std::int64_t total, std::int64_t chunk, Action&& action) {
  for (std::int64_t offset = 0; offset < total; offset += chunk) {
    action(Chunk{offset, total - offset < chunk ? total - offset : chunk});
  }
}

}  // namespace mds::train
