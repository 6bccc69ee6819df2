// The first half of convert-to-universal-checkpoint (checkpoints.md §3.2 steps 2-3): one rank's
// optimizer state read through the DeepSpeed loader and cut into per-parameter fragments in a
// scratch folder; then, per parameter, the fragments of the data-parallel ranks put back together
// into each TP rank's slice.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/universal_source.h"
#include "model/param_table.h"
#include "train/zero_partition.h"

namespace mds::ckpt {

// The states a universal checkpoint stores per parameter, in upstream's order.
inline constexpr std::array<std::string_view, 3> kUniversalStates = {"fp32", "exp_avg",
                                                                     "exp_avg_sq"};

// The tables of one pipeline stage at one TP rank.
struct StageRank {
  std::int64_t pp = 0;
  std::int64_t tp = 0;
  model::ParamTable table;
  train::ZeroLayout zero;  // over the source's D ranks (unused by unpartitioned layouts)

  StageRank(const UniversalSource& source, std::int64_t pp, std::int64_t tp);
};

// What one rank's files say, for the checks across files.
struct RankSummary {
  std::int64_t iteration = 0;
  std::int64_t global_steps = 0;
  std::int64_t adam_step = 0;
  std::uint64_t bytes = 0;  // fp32 bytes written to the scratch folder
};

// Loads DP rank `dp` of `stage` (its mp_rank file, and its ZeRO file for partitioned layouts; the
// layer files only for fp32 without ZeRO, whose weights are the masters) and writes, for every
// parameter it holds a part of (the last stage's tied embedding replica excepted), the fp32
// master, exp_avg and exp_avg_sq elements as raw little-endian fp32 to
// <scratch>/<engine name>/<tp>.<state>.<dp>. The parameter folders must exist. Errors name the
// checkpoint file at fault.
RankSummary extract_rank(const UniversalSource& source, const StageRank& stage, std::int64_t dp,
                         const std::string& scratch);

// The parameter folders extract_rank writes into: one per parameter of `stage` that the
// universal checkpoint stores.
std::vector<const model::ParamSpec*> stored_params(const StageRank& stage);

// TP rank `tp`'s slice of one state of a parameter: the fragments of DP ranks 0..dp_ranks−1 that
// hold a part of it, in rank order (a parameter's fragments follow each other over the ranks).
// Fails naming the parameter unless they add up to `numel` elements.
std::vector<float> read_tp_slice(const std::string& scratch, const std::string& engine_name,
                                 std::int64_t tp, std::string_view state, std::int64_t dp_ranks,
                                 std::int64_t numel);

}  // namespace mds::ckpt
