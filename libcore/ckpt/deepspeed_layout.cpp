#include "ckpt/deepspeed_layout.h"

#include <cstdio>
#include <cstring>

namespace mds::ckpt {

namespace {
// NCCL's 4-byte alignment in 16-bit elements, times the DP size (1).
constexpr std::int64_t kFlatAlignment = 2;
}  // namespace

std::string tag_for_step(std::int64_t global_steps) {
  return "global_step" + std::to_string(global_steps);
}

namespace {
std::string two_digits(std::int64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "%02lld", static_cast<long long>(value));
  return text;
}
}  // namespace

std::string model_states_file_name(std::int64_t mp_rank) {
  return "mp_rank_" + two_digits(mp_rank) + "_model_states.pt";
}

std::string zero_file_name(OptimizerLayout layout, std::int64_t dp_rank, std::int64_t mp_rank) {
  const std::string name = "zero_pp_rank_" + std::to_string(dp_rank) + "_mp_rank_" +
                           two_digits(mp_rank) + "_optim_states.pt";
  switch (layout) {
    case OptimizerLayout::kFp16Zero1:
    case OptimizerLayout::kFp32Zero:
      return name;
    case OptimizerLayout::kBf16:
      return "bf16_" + name;
    default:
      return "";
  }
}

std::vector<OptimizerGroup> optimizer_groups(const model::ParamTable& table) {
  std::vector<OptimizerGroup> groups;
  for (int g = 0; g < model::kNumDecayGroups; ++g) {
    OptimizerGroup group{static_cast<model::DecayGroup>(g), {}, 0, 0};
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (table[i].group != group.group) continue;
      group.params.push_back(i);
      group.numel += table[i].local_numel();
    }
    if (group.params.empty()) continue;
    group.aligned_numel = (group.numel + kFlatAlignment - 1) / kFlatAlignment * kFlatAlignment;
    groups.push_back(std::move(group));
  }
  return groups;
}

void pack_group(const model::ParamTable& table, const OptimizerGroup& group,
                const float* table_flat, float* packed) {
  for (const std::size_t i : group.params) {
    const auto n = static_cast<std::size_t>(table[i].local_numel());
    std::memcpy(packed, table_flat + table[i].offset, n * sizeof(float));
    packed += n;
  }
}

void unpack_group(const model::ParamTable& table, const OptimizerGroup& group, const float* packed,
                  float* table_flat) {
  for (const std::size_t i : group.params) {
    const auto n = static_cast<std::size_t>(table[i].local_numel());
    std::memcpy(table_flat + table[i].offset, packed, n * sizeof(float));
    packed += n;
  }
}

}  // namespace mds::ckpt
