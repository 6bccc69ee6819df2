// The device steps of a deterministic Σ x² in double, shared by kernels::sum_of_squares (one
// buffer) and kernels::sums_of_squares (many segments of one buffer), so that both give the same
// bits for the same elements: kSumOfSquaresPartials blocks each sum a fixed contiguous slice
// (threads striding through it), then one block adds the partials in a fixed order.
#pragma once
#include <cstdint>

#include "kernels/device_portable.cuh"
#include "kernels/sum_of_squares_partials.h"

namespace mds::kernels::detail {

// The elements block `block` of kSumOfSquaresPartials covers in a buffer of n: a split that
// depends only on n. Elements are stored as kS and widened exactly (16-bit weights give the bits of
// their fp32 widening: each square and sum is taken in double from the same value).
template <Storage kS = Storage::kF32>
__device__ inline double partial_squares(const void* x, std::int64_t n, std::int64_t block,
                                         double* scratch) {
  const std::int64_t per_block =
      n <= 0 ? 0 : (n + kSumOfSquaresPartials - 1) / kSumOfSquaresPartials;
  const std::int64_t begin = block * per_block;
  const std::int64_t end = begin + per_block < n ? begin + per_block : n;
  double sum = 0.0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double value = load<kS>(x, i);
    sum += value * value;
  }
  return block_sum(sum, scratch);
}

// Σ of kSumOfSquaresPartials partials, returned to every thread of the block.
__device__ inline double sum_partials(const double* partials, double* scratch) {
  double sum = 0.0;
  for (std::int64_t b = threadIdx.x; b < kSumOfSquaresPartials; b += kThreads) sum += partials[b];
  return block_sum(sum, scratch);
}

}  // namespace mds::kernels::detail
