// Column sums over the rows of a [rows, cols] matrix for bias and LayerNorm parameter gradients,
// in a fixed order so that results are deterministic: a block takes 32 columns; its 8 warps'
// lanes each own one column and sum rows warp, warp + 8, … in order; the 8 partial sums are then
// added in warp order.
#pragma once
#include <cstdint>

#include "kernels/device_portable.cuh"

namespace mds::kernels::detail {

constexpr int kColumnTile = 32;
constexpr int kRowLanes = kThreads / kColumnTile;

inline unsigned column_blocks(std::int64_t cols) {
  return static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile);
}

// The launch of a kernel calling sum_columns: column_blocks(cols) blocks of
// (kColumnTile, kRowLanes) threads.
inline LaunchShape column_shape(std::int64_t cols) {
  return {{column_blocks(cols)}, {kColumnTile, kRowLanes}};
}

// Launched with column_shape(cols). For each column c of
// the block's tile, `term(r, c, i)` (i = r·cols + c) is summed over all rows and handed to
// `finish(c, sum)` by one thread.
template <int kSums, typename Term, typename Finish>
__device__ void sum_columns(std::int64_t rows, std::int64_t cols, Term term, Finish finish) {
  __shared__ float partial[kSums][kRowLanes][kColumnTile];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  float sums[kSums] = {};
  if (c < cols) {
    for (std::int64_t r = threadIdx.y; r < rows; r += kRowLanes) term(r, c, r * cols + c, sums);
  }
  for (int k = 0; k < kSums; ++k) partial[k][threadIdx.y][threadIdx.x] = sums[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total[kSums];
    for (int k = 0; k < kSums; ++k) {
      total[k] = partial[k][0][threadIdx.x];
      for (int y = 1; y < kRowLanes; ++y) total[k] += partial[k][y][threadIdx.x];
    }
    finish(c, total);
  }
}

}  // namespace mds::kernels::detail
