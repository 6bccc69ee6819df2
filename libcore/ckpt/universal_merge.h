// How convert-to-universal-checkpoint puts the tensor-parallel slices of one parameter back
// together (checkpoints.md §3.2 step 4), with the rule the parameter's own TP split implies rather
// than upstream v0.1's name patterns: column-parallel and vocabulary rows concatenate on dim 0,
// row-parallel weights on dim 1, and replicated parameters (LayerNorms, row-parallel biases, the
// position table) must be identical on every TP rank and are stored once.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/param_table.h"

namespace mds::ckpt {

// One state (fp32, exp_avg or exp_avg_sq) of a whole parameter: what zero/<name>/<state>.pt holds.
struct UniversalState {
  std::vector<std::int64_t> shape;  // the unsharded shape (vocabulary: padded rows included)
  std::vector<float> values;        // row-major
  // The dimension the TP slices were concatenated on, which upstream's loader chunks again;
  // absent for replicated parameters (upstream's loader copies a tensor of the local shape).
  std::optional<std::int64_t> cat_dim;
};

// The concatenation dimension of a TP split: 0 for column-parallel and vocabulary parameters, 1
// for row-parallel weights, none for replicated parameters.
std::optional<std::int64_t> tp_cat_dim(model::TpSplit split);

// The whole parameter from its T slices (TP rank order, each of `local_shape`, row-major). A
// replicated parameter's slices must be bit-identical; otherwise, or when a slice has the wrong
// size, fails with one line starting with `what` (the parameter and state).
UniversalState merge_tp_slices(const std::vector<std::vector<float>>& slices,
                               const std::vector<std::int64_t>& local_shape, model::TpSplit split,
                               const std::string& what);

// Upstream v0.1's `vocab_divisibility_padding_tensor` of a vocabulary table [Vp, h]: its last row
// when it has padding rows (Vp > original_vocab_size), else a row of zeros.
std::vector<float> vocab_padding_row(const UniversalState& table, std::int64_t original_vocab_size);

}  // namespace mds::ckpt
