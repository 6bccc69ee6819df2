// DeepSpeed's flat parameter groups and their data-parallel partitions (training.md §4.3, §4.6;
// the numbers behind checkpoints.md's param_slice_mappings, group_paddings, partition_count and
// single_partition_of_fp32_groups), shared by BF16_Optimizer and ZeRO stages 1 and 2.
//
// Upstream, each optimizer group is one flat 16-bit vector: its parameters back to back, then
// zeros up to a multiple of 2·D, cut into D equal partitions. A ParamTable buffer holds the same
// groups in the same order, but every parameter starts on a 64-element boundary, so the two
// layouts differ by gaps. ZeroLayout records where each upstream element lives in the table
// buffer; the copy functions move data between the two layouts.
//
// Copies accept fp32, bf16 and fp16 on either side and convert with ops::cast (round to nearest
// even, as PyTorch's .to()); equal dtypes copy bits. The overloads with a DeviceContext copy on
// its device (one ops::cast per fragment), the others on the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/param_table.h"
#include "ops/device_context.h"
#include "tensor/tensor.h"

namespace mds::train {

// NCCL wants 4-byte aligned start addresses: 2 elements of a 16-bit dtype. Groups are padded to a
// multiple of this times D so that every partition starts aligned.
inline constexpr std::int64_t kNcclStartAlignment = 2;

// The sizes of one flat group of `numel` elements split over `dp_size` ranks.
struct AlignedPartition {
  std::int64_t aligned_numel = 0;    // numel rounded up to a multiple of 2·D
  std::int64_t partition_numel = 0;  // aligned_numel / D, equal on every rank
  std::int64_t padding = 0;          // aligned_numel − numel: zeros at the end of the flat group
};
AlignedPartition aligned_partition(std::int64_t numel, std::int64_t dp_size);

// The part of one parameter that falls into one rank's partition (DeepSpeed's tensor_fragment).
struct ZeroFragment {
  std::size_t param = 0;          // index in the ParamTable
  std::int64_t param_offset = 0;  // first element of the parameter covered (lp start)
  std::int64_t numel = 0;         // elements covered
  std::int64_t hp_start = 0;      // where they start inside the rank's partition
};

// One upstream optimizer group: a non-empty DecayGroup of the table.
struct ZeroGroup {
  model::DecayGroup decay_group = model::DecayGroup::kDecayFirstHalf;
  std::vector<std::size_t> params;         // table indices in group (= flat) order
  std::vector<std::int64_t> flat_offsets;  // where each of `params` starts in the flat group
  std::int64_t numel = 0;                  // Σ local numel, no padding
  std::int64_t aligned_numel = 0;
  std::int64_t partition_numel = 0;
  // fragments[r]: the parameters overlapping DP rank r's partition, in flat order; what
  // param_slice_mappings holds as `name → (numel, start = hp_start)`.
  std::vector<std::vector<ZeroFragment>> fragments;

  std::int64_t dp_size() const { return static_cast<std::int64_t>(fragments.size()); }
  std::int64_t padding() const { return aligned_numel - numel; }
  std::int64_t partition_begin(std::int64_t rank) const { return rank * partition_numel; }
  // Elements of rank r's partition that hold parameters (the rest, up to partition_numel, is
  // padding). Below partition_numel on the last rank, and on earlier ones too when the padding
  // (< 2·D) is longer than a partition, which only tiny groups with a large D reach.
  std::int64_t owned_numel(std::int64_t rank) const;
  // The group_paddings entry rank r writes: DeepSpeed 0.8.3 puts the whole padding on the last
  // rank and 0 elsewhere (checkpoints.md). Equals partition_numel − owned_numel(rank) whenever
  // the padding fits in the last partition.
  std::int64_t group_padding(std::int64_t rank) const;
};

class ZeroLayout {
 public:
  // `table` (one rank's parameters) must outlive the layout; dp_size >= 1.
  ZeroLayout(const model::ParamTable& table, std::int64_t dp_size);

  const model::ParamTable& table() const { return *table_; }
  std::int64_t dp_size() const { return dp_size_; }
  // The upstream groups: index g here is the group index in optimizer files.
  const std::vector<ZeroGroup>& groups() const { return groups_; }
  std::size_t size() const { return groups_.size(); }
  const ZeroGroup& operator[](std::size_t group) const;
  // The upstream index of a DecayGroup, or nullopt when it is empty on this rank (dropped).
  std::optional<std::size_t> index_of(model::DecayGroup decay_group) const;

  // Σ over groups: elements of the flat 16-bit buffers, and of one rank's fp32 partitions.
  std::int64_t aligned_numel() const;
  std::int64_t partition_numel() const;

 private:
  const model::ParamTable* table_;
  std::int64_t dp_size_;
  std::vector<ZeroGroup> groups_;
};

// `buffer_flat` is a ParamBuffer::flat() (table.buffer_numel() elements); `partition` has the
// group's partition_numel elements; `flat_group` its aligned_numel elements. Padding reads as 0
// and is never written into the table buffer, whose gaps the copies leave untouched.

// Rank `rank`'s partition of group `group`, gathered out of the table buffer.
void gather_partition(tensor::Tensor buffer_flat, const ZeroLayout& layout, std::size_t group,
                      std::int64_t rank, tensor::Tensor partition_out);
// The inverse: writes the parameter elements of `partition` into the table buffer.
void scatter_partition(tensor::Tensor partition, const ZeroLayout& layout, std::size_t group,
                       std::int64_t rank, tensor::Tensor buffer_flat);
// The whole upstream flat group (all partitions back to back, padding included).
void to_flat_group(tensor::Tensor buffer_flat, const ZeroLayout& layout, std::size_t group,
                   tensor::Tensor flat_group_out);
void from_flat_group(tensor::Tensor flat_group, const ZeroLayout& layout, std::size_t group,
                     tensor::Tensor buffer_flat);

// With a `factor` other than 1 the gathered elements are multiplied by it on the way (as
// ops::cast_pieces scales), in one pass.
void gather_partition(const ops::DeviceContext& ctx, tensor::Tensor buffer_flat,
                      const ZeroLayout& layout, std::size_t group, std::int64_t rank,
                      tensor::Tensor partition_out, float factor = 1.0f);
void scatter_partition(const ops::DeviceContext& ctx, tensor::Tensor partition,
                       const ZeroLayout& layout, std::size_t group, std::int64_t rank,
                       tensor::Tensor buffer_flat);
void to_flat_group(const ops::DeviceContext& ctx, tensor::Tensor buffer_flat,
                   const ZeroLayout& layout, std::size_t group, tensor::Tensor flat_group_out);
void from_flat_group(const ops::DeviceContext& ctx, tensor::Tensor flat_group,
                     const ZeroLayout& layout, std::size_t group, tensor::Tensor buffer_flat);

// Any range of the flat group: elements [begin, begin + range.numel()) of it, out of or into
// the table buffer (the functions above are these ranges: a partition is [r·ps, (r+1)·ps), the
// flat group [0, aligned_numel)). What ZeRO's chunked collectives move one chunk at a time.
void to_flat_range(const ops::DeviceContext& ctx, tensor::Tensor buffer_flat,
                   const ZeroLayout& layout, std::size_t group, std::int64_t begin,
                   tensor::Tensor range_out, float factor = 1.0f);
void from_flat_range(const ops::DeviceContext& ctx, tensor::Tensor range, const ZeroLayout& layout,
                     std::size_t group, std::int64_t begin, tensor::Tensor buffer_flat);

}  // namespace mds::train
