// The attention dropout's keep bits (Dropout::keep_bits) drawn ahead of a tensor-core forward that
// reads them (forward_kernel<…, true>), where s % 8 == 0 so that the 32 keys of a word are four
// whole Philox blocks (16 bits an element, ops::attention_dropout_keep). Drawing here rather
// than in the forward runs the integer work at full occupancy instead of beside the forward's mma
// at four warps a block. Plain CUDA, as attention_tc_kernels.cuh (run on the CPU by
// tests/unit/kernels_emulated_attention_tc_test.cpp).
//
// Only the causal triangle is drawn: a slice's rows are cut into bands of 32, and band b
// (rows 32b … 32b + 31) needs words 0 … b of each row (word b holds the diagonal). Its 32·(b + 1)
// words are numbered row by row after those of the bands above, so band b starts at word
// 16·b·(b + 1), and consecutive threads take consecutive words of the triangle: every warp but a
// slice's last is busy, where a block per row left on average a third of its lanes idle past the
// diagonal. Words wholly past the diagonal are not written (the readers zero those pairs whatever
// their bits); the diagonal word's bits of keys past the row are 0.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/attention_kernels.cuh"
#include "kernels/philox.cuh"

namespace mds::kernels::attention_tc_detail {

// Bands of 32 rows in a slice of s rows, and the triangle's words in them.
__host__ __device__ constexpr std::uint32_t keep_bands(std::int64_t s) {
  return static_cast<std::uint32_t>((s + 31) / 32);
}
__host__ __device__ constexpr std::int64_t triangle_words(std::int64_t s) {
  return 16 * static_cast<std::int64_t>(keep_bands(s)) * (keep_bands(s) + 1);
}

// The band holding word u of the triangle: the largest b with 16·b·(b + 1) <= u. The square root
// gives it to within one either way; the two steps settle it exactly.
__host__ __device__ inline std::uint32_t band_of_word(std::uint32_t u) {
  auto b = static_cast<std::uint32_t>((sqrtf(1.0f + 0.25f * static_cast<float>(u)) - 1.0f) * 0.5f);
  while (16u * (b + 1) * (b + 2) <= u) ++b;
  while (b > 0 && 16u * b * (b + 1) > u) --b;
  return b;
}

// Where word u of a slice's triangle lies.
struct TriangleWord {
  std::uint32_t row, word;
};

__host__ __device__ inline TriangleWord triangle_word(std::uint32_t u) {
  const std::uint32_t b = band_of_word(u);
  const std::uint32_t v = u - 16u * b * (b + 1), row_in_band = v / (b + 1);
  return {32 * b + row_in_band, v - row_in_band * (b + 1)};
}

// Blocks of `threads` threads a slice's triangle takes, a thread a word.
__host__ __device__ constexpr std::uint32_t triangle_groups(std::int64_t s, unsigned threads) {
  return static_cast<std::uint32_t>((triangle_words(s) + threads - 1) / threads);
}

// Block (x, y) draws words x·blockDim.x … of slice y's triangle, a thread a word: its 32 keys'
// four Philox blocks (independent chains; a diagonal word's blocks past the row too, whose bits
// are then cleared). The word's place comes from 32-bit arithmetic, as a 64-bit division per
// thread cost more than the draws (an H100 took 0.22 ms a GPT-2 124M layer with one); a word a
// thread rather than two lanes a word halves that arithmetic per draw. static: the emulated
// tests define the same function on the host.
static __global__ void draw_keep_bits_kernel(attention_detail::Geometry g) {
  const attention_detail::Dropout& d = g.dropout;
  const std::uint32_t bh = blockIdx.y, batch = bh / static_cast<std::uint32_t>(d.np);
  const std::int64_t sh =
      static_cast<std::int64_t>(batch) * d.stream_heads + d.first_head + (bh - batch * d.np);
  // triangle_words in 32 bits, as keep_bits_draw_launch's `fits` allows.
  const std::uint32_t bands = keep_bands(g.s), words = 16u * bands * (bands + 1);
  const std::uint32_t u = blockIdx.x * blockDim.x + threadIdx.x;
  if (u >= words) return;
  const TriangleWord at = triangle_word(u);
  const std::int64_t row = at.row, key0 = 32 * static_cast<std::int64_t>(at.word);
  if (row >= g.s) return;
  // The first key's element of the stream, a multiple of 8 as s and key0 are.
  const auto first = static_cast<std::uint64_t>((sh * g.s + row) * g.s + key0);
  const std::uint32_t threshold = detail::keep_threshold16(d.p);
  detail::PhiloxWords drawn[4];
#pragma unroll
  for (int b = 0; b < 4; ++b) drawn[b] = detail::philox_block(d.seed, d.offset, first / 8 + b);
  std::uint32_t bits = 0;
#pragma unroll
  for (int b = 0; b < 4; ++b) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const std::uint32_t word = drawn[b].w[k];
      bits |= static_cast<std::uint32_t>((word & 0xFFFFu) >= threshold) << (8 * b + 2 * k);
      bits |= static_cast<std::uint32_t>((word >> 16) >= threshold) << (8 * b + 2 * k + 1);
    }
  }
  // Keys past the row (the diagonal word's only) keep no bit; row − key0 < 32.
  if (key0 + 31 > row) bits &= (2u << (row - key0)) - 1u;
  const std::int64_t slice_row = static_cast<std::int64_t>(bh) * g.s + row;
  d.keep_bits[slice_row * attention_detail::keep_words(g.s) + at.word] = bits;
}

// The launch of draw_keep_bits_kernel over `slices` slices of s rows: a row of `groups` blocks of
// 256 threads (fewer, whole warps, for a small triangle) per slice. `fits` is false where the
// grid or the kernel's 32-bit word numbers cannot hold them (more than 65,535 slices, or s past
// 520,000 or so); the forward then draws the bits itself.
struct KeepBitsLaunch {
  unsigned groups, slices, threads;
  bool fits;
};

inline KeepBitsLaunch keep_bits_draw_launch(std::int64_t slices, std::int64_t s) {
  const std::int64_t words = triangle_words(s);
  const auto threads = static_cast<unsigned>(words < 256 ? (words + 31) / 32 * 32 : 256);
  // 16·(b + 1)·(b + 2) must stay below 2^32 for every band b the search steps through.
  const std::int64_t bands = keep_bands(s);
  const bool fits = slices <= 65535 && 16 * (bands + 1) * (bands + 2) < std::int64_t{1} << 32;
  return {triangle_groups(s, threads), static_cast<unsigned>(fits ? slices : 0), threads, fits};
}

}  // namespace mds::kernels::attention_tc_detail
