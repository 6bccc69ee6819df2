// The fixed split of the deterministic Σ x² (kernels::sum_of_squares, sums_of_squares), in a
// header free of CUDA includes so that the device code (sum_of_squares.cuh) can be compiled for the
// CPU emulation too.
#pragma once
#include <cstdint>

namespace mds::kernels {

// Blocks of the first pass: each sums a fixed contiguous slice into partials[block].
constexpr std::int64_t kSumOfSquaresPartials = 512;

}  // namespace mds::kernels
