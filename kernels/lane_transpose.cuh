// A 4 × 4 transpose of floats or words among four lanes of a warp, by shuffles: the lanes sharing a
// Philox block's four words each draw one block and hand each other the words they need
// (attention_tc_dropout.cuh, dropout_kernels.cuh). Plain CUDA with no runtime includes, for the
// SIMT emulation of the unit tests.
#pragma once

namespace mds::kernels::detail {

// out[k] = m[i] of group member k, for the four lanes of a group (member i of the calling lane;
// members differ by `lo` in the lane id for bit 0 of i and by `hi` for bit 1): a 4 × 4 transpose
// in two butterfly stages of two shuffles each.
// T: float, or std::uint32_t for raw words.
template <typename T>
__device__ __forceinline__ void transpose4(T out[4], const T m[4], int i, int lo, int hi) {
  const bool bit1 = (i & 2) != 0, bit0 = (i & 1) != 0;
  // With member i ^ 2: keep the words j whose bit 1 is i's, trade the others.
  const T keep0 = bit1 ? m[2] : m[0], keep1 = bit1 ? m[3] : m[1];
  const T got0 = __shfl_xor_sync(0xFFFFFFFFu, bit1 ? m[0] : m[2], hi);
  const T got1 = __shfl_xor_sync(0xFFFFFFFFu, bit1 ? m[1] : m[3], hi);
  // keep: member i's words j0, j0 + 1 (j0 = i & 2); got: member i ^ 2's same words. With member
  // i ^ 1: keep word i, trade word i ^ 1.
  const T own = bit0 ? keep1 : keep0, across = bit0 ? got1 : got0;
  const T near = __shfl_xor_sync(0xFFFFFFFFu, bit0 ? keep0 : keep1, lo);
  const T far = __shfl_xor_sync(0xFFFFFFFFu, bit0 ? got0 : got1, lo);
  // own = member i's word i, across = member (i ^ 2)'s, near = (i ^ 1)'s, far = (i ^ 3)'s.
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int d = k ^ i;
    out[k] = d == 0 ? own : d == 2 ? across : d == 1 ? near : far;
  }
}

}  // namespace mds::kernels::detail
