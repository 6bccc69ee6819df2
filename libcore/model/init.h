#pragma once
#include <cstdint>

#include "model/param_buffer.h"

namespace mds::model {

// Fills every parameter with its training.md §1.7 initial value: N(0, σ) for the embeddings, QKV
// and dense_h_to_4h weights, N(0, σ/sqrt(2L)) for the attention dense and dense_4h_to_h weights,
// 1 for LayerNorm weights and 0 for biases (σ and the kind come from the table).
//
// Values come from a counter-based normal generator (Philox-4x32-10 + Box–Muller) keyed on
// (seed, parameter identity, element index of the unsharded tensor). The identity is the spec
// index and name, not the table position, so the values do not depend on the buffer layout, the
// thread count, the pipeline stage (the last stage's tied embedding copy gets the first stage's
// values) or the tensor-parallel split of the table's TP rank (as upstream's
// --use-cpu-initialization). Upstream's values come from torch's generators in module
// construction order and cannot be reproduced bit for bit; only the distribution matches.
//
// Host buffers of fp32, bf16 or fp16 (values rounded to nearest even).
void initialize_parameters(const ParamBuffer& params, std::uint64_t seed);

}  // namespace mds::model
