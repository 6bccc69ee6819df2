// The attention dropout's keep bits (Dropout::keep_bits) for the SIMT kernels' forward, which
// draws pair by pair and keeps nothing: kernels/attention.cu runs keep_bits_kernel after it so
// that a tensor-core backward can read them. Plain CUDA, as attention_kernels.cuh (run on the CPU
// by tests/unit/kernels_emulated_attention_tc_test.cpp); one translation unit each.
#pragma once
#include <cstdint>

#include "kernels/attention_kernels.cuh"

namespace mds::kernels::attention_detail {

// Dropout::keep_bits of rows [32·blockIdx.y, +32) of slice blockIdx.x, for a backward after these
// kernels' forward (which draws pair by pair and keeps nothing): a thread per word, the bits of
// keys ≤ row, zeros above.
// static: the emulated tests define the same function on the host.
static __global__ void __launch_bounds__(kThreads) keep_bits_kernel(Geometry g) {
  const std::int64_t bh = blockIdx.x, words = keep_words(g.s);
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  for (std::int64_t e = threadIdx.x; e < kTile * words; e += kThreads) {
    const std::int64_t row = i0 + e / words, first = 32 * (e % words);
    if (row >= g.s) break;  // rows grow with e
    std::uint32_t word = 0;
    for (int k = 0; k < 32 && first + k <= row; ++k) {
      if (dropout_factor(g, bh, row, first + k) != 0.0f) word |= 1u << k;
    }
    g.dropout.keep_bits[keep_word_index(g.s, bh, row, first)] = word;
  }
}

}  // namespace mds::kernels::attention_detail
