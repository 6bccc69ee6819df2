#include "train/zero_partition.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "ops/elementwise.h"

namespace mds::train {

using tensor::Tensor;

AlignedPartition aligned_partition(std::int64_t numel, std::int64_t dp_size) {
  if (numel < 0) base::fail("aligned_partition: numel must not be negative, got ", numel);
  if (dp_size < 1) base::fail("aligned_partition: dp_size must be at least 1, got ", dp_size);
  const std::int64_t align = kNcclStartAlignment * dp_size;
  AlignedPartition result;
  result.aligned_numel = (numel + align - 1) / align * align;
  result.partition_numel = result.aligned_numel / dp_size;
  result.padding = result.aligned_numel - numel;
  return result;
}

std::int64_t ZeroGroup::owned_numel(std::int64_t rank) const {
  return std::clamp<std::int64_t>(numel - partition_begin(rank), 0, partition_numel);
}

std::int64_t ZeroGroup::group_padding(std::int64_t rank) const {
  return rank == dp_size() - 1 ? padding() : 0;
}

namespace {

// The fragments of every parameter of `group` that overlap [begin, begin + size), as
// DeepSpeed's get_hp_fragment_mapping intersects each lp range with the hp partition.
std::vector<ZeroFragment> fragments_of(const ZeroGroup& group,
                                       const std::vector<std::int64_t>& param_numels,
                                       std::int64_t begin, std::int64_t size) {
  std::vector<ZeroFragment> fragments;
  const std::int64_t end = begin + size;
  for (std::size_t k = 0; k < group.params.size(); ++k) {
    const std::int64_t lp_begin = group.flat_offsets[k];
    const std::int64_t lp_end = lp_begin + param_numels[k];
    const std::int64_t first = std::max(lp_begin, begin);
    const std::int64_t last = std::min(lp_end, end);
    if (first >= last) continue;
    fragments.push_back({group.params[k], first - lp_begin, last - first, first - begin});
  }
  return fragments;
}

}  // namespace

ZeroLayout::ZeroLayout(const model::ParamTable& table, std::int64_t dp_size)
    : table_(&table), dp_size_(dp_size) {
  if (dp_size < 1) base::fail("ZeroLayout: dp_size must be at least 1, got ", dp_size);
  for (int g = 0; g < model::kNumDecayGroups; ++g) {
    ZeroGroup group;
    group.decay_group = static_cast<model::DecayGroup>(g);
    std::vector<std::int64_t> numels;
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (table[i].group != group.decay_group) continue;
      group.params.push_back(i);
      group.flat_offsets.push_back(group.numel);
      numels.push_back(table[i].local_numel());
      group.numel += table[i].local_numel();
    }
    // DeepSpeed drops empty groups, so later groups move up one index.
    if (group.params.empty()) continue;
    const AlignedPartition sizes = aligned_partition(group.numel, dp_size);
    group.aligned_numel = sizes.aligned_numel;
    group.partition_numel = sizes.partition_numel;
    for (std::int64_t rank = 0; rank < dp_size; ++rank) {
      group.fragments.push_back(
          fragments_of(group, numels, group.partition_begin(rank), group.partition_numel));
    }
    groups_.push_back(std::move(group));
  }
}

const ZeroGroup& ZeroLayout::operator[](std::size_t group) const {
  if (group >= groups_.size()) {
    base::fail("ZeroLayout: group ", group, " out of range; the layout has ", groups_.size());
  }
  return groups_[group];
}

std::optional<std::size_t> ZeroLayout::index_of(model::DecayGroup decay_group) const {
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].decay_group == decay_group) return g;
  }
  return std::nullopt;
}

std::int64_t ZeroLayout::aligned_numel() const {
  std::int64_t total = 0;
  for (const ZeroGroup& group : groups_) total += group.aligned_numel;
  return total;
}

std::int64_t ZeroLayout::partition_numel() const {
  std::int64_t total = 0;
  for (const ZeroGroup& group : groups_) total += group.partition_numel;
  return total;
}

namespace {

// 1-D views after checking element counts, so a mismatch names the argument.
Tensor flat_view(const char* op, const char* what, Tensor t, std::int64_t expected) {
  if (t.numel() != expected) {
    base::fail(op, ": ", what, " has ", t.numel(), " elements, expected ", expected);
  }
  return t.reshape(tensor::Shape{expected});
}

const ZeroGroup& checked_group(const char* op, const ZeroLayout& layout, std::size_t group,
                               std::int64_t rank) {
  const ZeroGroup& g = layout[group];
  if (rank < 0 || rank >= layout.dp_size()) {
    base::fail(op, ": DP rank ", rank, " is outside [0, ", layout.dp_size(), ")");
  }
  return g;
}

// Calls copy(range_offset, buffer_offset, numel) for each piece of a parameter that falls into
// [begin, end) of the flat group: where it goes in the range and where it is in the table buffer.
template <typename Copy>
void for_each_param_piece(const ZeroLayout& layout, const ZeroGroup& g, std::int64_t begin,
                          std::int64_t end, Copy&& copy) {
  // The last parameter starting at or before `begin` is the first that can overlap the range.
  const auto after = std::upper_bound(g.flat_offsets.begin(), g.flat_offsets.end(), begin);
  std::size_t k = after == g.flat_offsets.begin()
                      ? 0
                      : static_cast<std::size_t>(after - g.flat_offsets.begin()) - 1;
  for (; k < g.params.size() && g.flat_offsets[k] < end; ++k) {
    const model::ParamSpec& param = layout.table()[g.params[k]];
    const std::int64_t lp_begin = g.flat_offsets[k];
    const std::int64_t first = std::max(lp_begin, begin);
    const std::int64_t last = std::min(lp_begin + param.local_numel(), end);
    if (first < last) copy(first - begin, param.offset + (first - lp_begin), last - first);
  }
}

void check_range(const char* op, const ZeroGroup& g, std::int64_t begin, std::int64_t numel) {
  if (begin < 0 || numel < 0 || begin + numel > g.aligned_numel) {
    base::fail(op, ": range [", begin, ", ", begin + numel, ") is outside the flat group of ",
               g.aligned_numel, " elements");
  }
}

}  // namespace

void to_flat_range(const ops::DeviceContext& ctx, Tensor buffer_flat, const ZeroLayout& layout,
                   std::size_t group, std::int64_t begin, Tensor range_out, float factor) {
  constexpr const char* kOp = "to_flat_range";
  const ZeroGroup& g = layout[group];
  const Tensor buffer = flat_view(kOp, "buffer", buffer_flat, layout.table().buffer_numel());
  const Tensor range = flat_view(kOp, "range", range_out, range_out.numel());
  const std::int64_t end = begin + range.numel();
  check_range(kOp, g, begin, range.numel());
  std::vector<ops::CastPiece> pieces;
  for_each_param_piece(layout, g, begin, end,
                       [&](std::int64_t at, std::int64_t from, std::int64_t numel) {
                         pieces.push_back({at, from, numel});
                       });
  ops::cast_pieces(ctx, range, buffer, pieces, factor);
  const std::int64_t padding = std::max(g.numel, begin);
  if (padding < end) ops::fill(ctx, range.narrow(padding - begin, end - padding), 0.0f);
}

void from_flat_range(const ops::DeviceContext& ctx, Tensor range_in, const ZeroLayout& layout,
                     std::size_t group, std::int64_t begin, Tensor buffer_flat) {
  constexpr const char* kOp = "from_flat_range";
  const ZeroGroup& g = layout[group];
  const Tensor buffer = flat_view(kOp, "buffer", buffer_flat, layout.table().buffer_numel());
  const Tensor range = flat_view(kOp, "range", range_in, range_in.numel());
  check_range(kOp, g, begin, range.numel());
  std::vector<ops::CastPiece> pieces;
  for_each_param_piece(layout, g, begin, begin + range.numel(),
                       [&](std::int64_t at, std::int64_t to, std::int64_t numel) {
                         pieces.push_back({to, at, numel});
                       });
  ops::cast_pieces(ctx, buffer, range, pieces);
}

void gather_partition(Tensor buffer_flat, const ZeroLayout& layout, std::size_t group,
                      std::int64_t rank, Tensor partition_out) {
  gather_partition(ops::DeviceContext{}, buffer_flat, layout, group, rank, partition_out);
}

void gather_partition(const ops::DeviceContext& ctx, Tensor buffer_flat, const ZeroLayout& layout,
                      std::size_t group, std::int64_t rank, Tensor partition_out, float factor) {
  constexpr const char* kOp = "gather_partition";
  const ZeroGroup& g = checked_group(kOp, layout, group, rank);
  to_flat_range(ctx, buffer_flat, layout, group, g.partition_begin(rank),
                flat_view(kOp, "partition", partition_out, g.partition_numel), factor);
}

void scatter_partition(Tensor partition_in, const ZeroLayout& layout, std::size_t group,
                       std::int64_t rank, Tensor buffer_flat) {
  scatter_partition(ops::DeviceContext{}, partition_in, layout, group, rank, buffer_flat);
}

void scatter_partition(const ops::DeviceContext& ctx, Tensor partition_in, const ZeroLayout& layout,
                       std::size_t group, std::int64_t rank, Tensor buffer_flat) {
  constexpr const char* kOp = "scatter_partition";
  const ZeroGroup& g = checked_group(kOp, layout, group, rank);
  from_flat_range(ctx, flat_view(kOp, "partition", partition_in, g.partition_numel), layout, group,
                  g.partition_begin(rank), buffer_flat);
}

void to_flat_group(Tensor buffer_flat, const ZeroLayout& layout, std::size_t group,
                   Tensor flat_group_out) {
  to_flat_group(ops::DeviceContext{}, buffer_flat, layout, group, flat_group_out);
}

void to_flat_group(const ops::DeviceContext& ctx, Tensor buffer_flat, const ZeroLayout& layout,
                   std::size_t group, Tensor flat_group_out) {
  const ZeroGroup& g = layout[group];
  to_flat_range(ctx, buffer_flat, layout, group, 0,
                flat_view("to_flat_group", "flat group", flat_group_out, g.aligned_numel));
}

void from_flat_group(Tensor flat_group, const ZeroLayout& layout, std::size_t group,
                     Tensor buffer_flat) {
  from_flat_group(ops::DeviceContext{}, flat_group, layout, group, buffer_flat);
}

void from_flat_group(const ops::DeviceContext& ctx, Tensor flat_group, const ZeroLayout& layout,
                     std::size_t group, Tensor buffer_flat) {
  const ZeroGroup& g = layout[group];
  from_flat_range(ctx, flat_view("from_flat_group", "flat group", flat_group, g.aligned_numel),
                  layout, group, 0, buffer_flat);
}

}  // namespace mds::train
