// Model-state memory per data-parallel rank under ZeRO stages 0-3 with Adam: weights, gradients
// and optimizer state, no activations, buffers of collectives or fragmentation. Two answers side
// by side: the ZeRO paper's closed form (Rajbhandari et al. 2020, §3: (2 + 2 + K)·Ψ with K = 12
// for mixed-precision Adam), and a plan from the real layouts (ParamTable, ZeroLayout), which
// adds the 64-element gaps of the table buffer and the 2·D padding of the flat groups.
#pragma once

#include <cstdint>

#include "model/gpt_config.h"
#include "train/zero_partition.h"

namespace mds::train {

enum class StatePrecision {
  // 16-bit weights and gradients, fp32 master weights, exp_avg and exp_avg_sq: 2 + 2 + 12.
  kMixed,
  // fp32 weights and gradients, fp32 exp_avg and exp_avg_sq, no master copy: 4 + 4 + 8.
  kFp32,
};

// Bytes per parameter of each kind of state (the paper's 2, 2 and K).
struct StateBytesPerElement {
  int param = 0;
  int grad = 0;
  int optimizer = 0;  // K
};
StateBytesPerElement bytes_per_element(StatePrecision precision);

// Bytes on one rank. Doubles because the paper's Ψ/N_d need not be whole; planned values are.
struct ModelStateBytes {
  double params = 0;
  double grads = 0;
  double optimizer = 0;  // master weights (mixed only) and both Adam moments
  double total() const { return params + grads + optimizer; }
};

// Which states a ZeRO stage partitions over the DP group: 1 the optimizer state, 2 also the
// gradients, 3 also the weights. stage must be in [0, 3].
// The paper: stage 0 (p + g + K)·Ψ, 1 (p + g)·Ψ + K·Ψ/N_d, 2 p·Ψ + (g + K)·Ψ/N_d,
// 3 (p + g + K)·Ψ/N_d.
ModelStateBytes paper_model_state_bytes(std::int64_t psi, std::int64_t dp_size, int stage,
                                        StatePrecision precision = StatePrecision::kMixed);

// The same from the layouts: an unpartitioned state takes a whole table buffer
// (table.buffer_numel() elements, mds's per-parameter 64-element alignment included), a
// partitioned one its rank's partitions of the upstream flat groups (layout.partition_numel()).
// Stage 3 is modelled with the same flat-group partitions (upstream partitions each parameter
// separately there; the sizes differ by at most the padding).
ModelStateBytes plan_model_state_bytes(const ZeroLayout& layout, int stage,
                                       StatePrecision precision = StatePrecision::kMixed);

// A GPT-2 shape for the planner: s = max positions = 1024, Vp = 50304, absolute positions,
// FFN 4h, T = P = 1 (124M: 12/768/12, 350M: 24/1024/16, 1.5B: 48/1600/25).
model::GptConfig gpt2_memory_config(std::int64_t num_layers, std::int64_t hidden_size,
                                    std::int64_t num_attention_heads);

}  // namespace mds::train
