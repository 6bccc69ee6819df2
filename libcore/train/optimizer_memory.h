// What MixedPrecisionOptimizer holds on its device, buffer by buffer, computed from the layouts
// alone (ParamTable, ZeroLayout): the weights and their fp32 compute copy (16-bit runs with fp32
// activations only: OptimizerOptions::fp32_compute_copy), the micro-batch gradients, the gradient
// accumulator, the fp32 master and Adam moments, and the bounded staging of the collectives.
// MixedPrecisionOptimizer::memory() reports the same list from the buffers it allocated; a unit
// test holds the two equal to the byte, so this plan is what a run takes (activations, the data
// loader, communicator buffers and a device run's host copies aside).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "model/param_table.h"

namespace mds::train {

struct OptimizerOptions;

struct BufferBytes {
  std::string_view name;
  std::size_t bytes = 0;
  friend bool operator==(const BufferBytes&, const BufferBytes&) = default;
};

// The buffers, in memory()'s order, of an optimizer over `table` on `dp_size` data-parallel
// ranks after its first step (when the staging has grown to what a step needs; pipeline
// ReduceTiedGrads at stage 2 may grow it further, to at most 4·collective_chunk_numel bytes).
// Buffers a layout does not have are left out.
std::vector<BufferBytes> plan_optimizer_memory(const model::ParamTable& table, std::int64_t dp_size,
                                               const OptimizerOptions& options);

std::size_t total_bytes(const std::vector<BufferBytes>& buffers);

}  // namespace mds::train
