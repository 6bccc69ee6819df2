// The attention dropout of the tensor-core kernels (attention_tc_kernels.cuh): the factor (scale
// if kept, 0 if dropped) of pair (row i, key j) of slice bh is that of element (sh·s + i)·s + j of
// the layer's Philox stream, sh = batch·stream_heads + first_head + head, 16 bits an element as
// ops::attention_dropout_keep draws it: the CPU's masks (ops/cpu/attention.cpp), as
// attention_detail::dropout_factor draws them.
//
// A Philox block gives the bits of eight consecutive elements and costs about as much as
// 40 products' worth of integer work, far more than the mma work per element, so each block is
// drawn once where possible: with s % 8 == 0 every tile's first key starts a block, and the lanes
// that share blocks draw one block each and exchange the words they need by shuffles (one in the
// forward/dq layout, four in the dk/dv layout). Otherwise a pair of consecutive keys costs one
// block (two when it straddles blocks) and the dk/dv layout one block per element. The shared
// draws contain shuffles of the whole warp: call them in warp-uniform control flow.
#pragma once
#include <cstdint>

#include "kernels/attention_kernels.cuh"
#include "kernels/lane_transpose.cuh"
#include "kernels/philox.cuh"

namespace mds::kernels::attention_tc_detail {

__device__ __forceinline__ std::uint32_t word_at(const detail::PhiloxWords& words, int k) {
  // Selects instead of indexing, so that the words stay in registers.
  return k == 0 ? words.w[0] : k == 1 ? words.w[1] : k == 2 ? words.w[2] : words.w[3];
}

__device__ __forceinline__ std::uint64_t dropout_index(const attention_detail::Geometry& g,
                                                       std::int64_t bh, std::int64_t row,
                                                       std::int64_t key) {
  const attention_detail::Dropout& d = g.dropout;
  const std::int64_t sh = (bh / d.np) * d.stream_heads + d.first_head + bh % d.np;
  return static_cast<std::uint64_t>((sh * g.s + row) * g.s + key);
}

// The factor of the element whose 16 bits are `half`.
__device__ __forceinline__ float keep_factor(const attention_detail::Dropout& d,
                                             std::uint32_t half) {
  return half >= detail::keep_threshold16(d.p) ? d.scale : 0.0f;
}

// Half `h` (0: low) of a word.
__device__ __forceinline__ std::uint32_t half_of(std::uint32_t word, int h) {
  return (word >> (16 * h)) & 0xFFFFu;
}

// Pairs (row, key) and (row, key + 1), any s.
__device__ __forceinline__ void dropout_pair(float f[2], const attention_detail::Geometry& g,
                                             std::int64_t bh, std::int64_t row, std::int64_t key) {
  const attention_detail::Dropout& d = g.dropout;
  const std::uint64_t index = dropout_index(g, bh, row, key);
  const detail::PhiloxWords words = detail::philox_block(d.seed, d.offset, index / 8);
  f[0] = keep_factor(d, detail::philox_half(words, index));
  if (index % 8 < 7) {
    f[1] = keep_factor(d, detail::philox_half(words, index + 1));
  } else {
    const detail::PhiloxWords next = detail::philox_block(d.seed, d.offset, index / 8 + 1);
    f[1] = keep_factor(d, detail::philox_half(next, index + 1));
  }
}

// Pair (row, key) alone, any s.
__device__ __forceinline__ float dropout_one(const attention_detail::Geometry& g, std::int64_t bh,
                                             std::int64_t row, std::int64_t key) {
  const attention_detail::Dropout& d = g.dropout;
  const std::uint64_t index = dropout_index(g, bh, row, key);
  return keep_factor(d,
                     detail::philox_half(detail::philox_block(d.seed, d.offset, index / 8), index));
}

// Forward/dq layout, s % 8 == 0: the quad holding `row` (lane t: keys 2t, 2t + 1 of each n-tile)
// over the 16 keys from `key0` (n-tiles nt and nt + 1; key0 % 16 == 0), one block per n-tile.
// f[tile][c] is the factor of key key0 + 8·tile + 2t + c, half c of word t of the tile's block.
// Lane t draws the block of n-tile t & 1 and hands its neighbour word t ^ 1 of it.
__device__ __forceinline__ void dropout_quad(float f[2][2], const attention_detail::Geometry& g,
                                             std::int64_t bh, std::int64_t row, std::int64_t key0) {
  const int t = static_cast<int>(threadIdx.x) % 4, tile = t & 1;
  const attention_detail::Dropout& d = g.dropout;
  const detail::PhiloxWords words =
      detail::philox_block(d.seed, d.offset, dropout_index(g, bh, row, key0 + 8 * tile) / 8);
  const std::uint32_t own = word_at(words, t);
  const std::uint32_t got = __shfl_xor_sync(0xFFFFFFFFu, word_at(words, t ^ 1), 1);
  const std::uint32_t tile0 = tile == 0 ? own : got, tile1 = tile == 0 ? got : own;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    f[0][c] = keep_factor(d, half_of(tile0, c));
    f[1][c] = keep_factor(d, half_of(tile1, c));
  }
}

// dk/dv layout, s % 8 == 0: lane (group g, t) holds keys key_base + g + 8h (h = 0, 1; key_base
// % 16 == 0) for the queries query0 + c (c = 0, 1). f[c][h] is the factor of that pair: half
// g % 2 of word g / 2 of block (c, h), the eight keys key_base + 8h … of query query0 + c. The
// eight lanes of one t share those four blocks: lane g draws block b = g / 2 ((c, h) = (b / 2,
// b % 2)), and the four lanes of each parity (lane ids 8 and 16 apart) transpose their words, so
// that lane g gets word g / 2 of every block.
__device__ __forceinline__ void dropout_transposed(float f[2][2],
                                                   const attention_detail::Geometry& g,
                                                   std::int64_t bh, std::int64_t query0,
                                                   std::int64_t key_base) {
  const int group = static_cast<int>(threadIdx.x) % 32 / 4, b = group / 2;
  const attention_detail::Dropout& d = g.dropout;
  const detail::PhiloxWords words = detail::philox_block(
      d.seed, d.offset, dropout_index(g, bh, query0 + (b >> 1), key_base + 8 * (b & 1)) / 8);
  std::uint32_t out[4];
  detail::transpose4(out, words.w, b, 8, 16);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
#pragma unroll
    for (int h = 0; h < 2; ++h) f[c][h] = keep_factor(d, half_of(out[2 * c + h], group % 2));
  }
}

// The factors of the forward/dq layout: f[tile][c] for key key0 + 8·tile + 2t + c of `row`
// (key0 % 16 == 0), 1 where no factor is needed. Warp-uniform.
__device__ __forceinline__ void row_dropout(float f[2][2], const attention_detail::Geometry& g,
                                            std::int64_t bh, std::int64_t row, std::int64_t key0) {
  if (g.s % 8 == 0) {
    dropout_quad(f, g, bh, row, key0);
    return;
  }
  const std::int64_t key = key0 + 2 * (static_cast<int>(threadIdx.x) % 4);
#pragma unroll
  for (int tile = 0; tile < 2; ++tile) {
    f[tile][0] = f[tile][1] = 1.0f;
    if (row < g.s && key + 8 * tile <= row) dropout_pair(f[tile], g, bh, row, key + 8 * tile);
  }
}

// The factors of the dk/dv layout: f[c][h] for query query0 + c and key key_base + g + 8h
// (key_base % 16 == 0, g = lane / 4), 1 where no factor is needed. Warp-uniform.
__device__ __forceinline__ void column_dropout(float f[2][2], const attention_detail::Geometry& g,
                                               std::int64_t bh, std::int64_t query0,
                                               std::int64_t key_base) {
  if (g.s % 8 == 0) {
    dropout_transposed(f, g, bh, query0, key_base);
    return;
  }
  const std::int64_t key = key_base + static_cast<int>(threadIdx.x) % 32 / 4;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::int64_t row = query0 + c;
      f[c][h] = row < g.s && key + 8 * h <= row ? dropout_one(g, bh, row, key + 8 * h) : 1.0f;
    }
  }
}

// ---- keep bits (Dropout::keep_bits) ----------------------------------------------------------
// The forward stores the bits of its factors; with them the backward kernels read a word per row
// and key tile of 32 instead of drawing Philox blocks. Bits of pairs past the causal mask or past
// the end are whatever the forward drew (row_dropout's 1 or a real draw): the backward zeroes
// those pairs anyway.

// This lane's bits of the forward/dq layout's factors f[tile][c] (keys key0 + 8·tile + 2t + c,
// key0 % 16 == 0) at their places in the word holding key0.
__device__ __forceinline__ std::uint32_t quad_keep_bits(const float f[2][2], std::int64_t key0) {
  const int base = static_cast<int>(key0 % 32) + 2 * (static_cast<int>(threadIdx.x) % 4);
  std::uint32_t bits = 0;
#pragma unroll
  for (int tile = 0; tile < 2; ++tile) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      if (f[tile][c] != 0.0f) bits |= 1u << (base + 8 * tile + c);
    }
  }
  return bits;
}

// Forward: where lane t of a quad stores its words, the row row_base + 8·(t % 2) (null past the
// end, and for lanes t ≥ 2, which hold copies).
__device__ __forceinline__ std::uint32_t* keep_row_of_lane(const attention_detail::Geometry& g,
                                                           std::int64_t bh, std::int64_t row_base) {
  const int t = static_cast<int>(threadIdx.x) % 4;
  const std::int64_t row = row_base + 8 * (t % 2);
  if (t >= 2 || row >= g.s) return nullptr;
  return g.dropout.keep_bits + attention_detail::keep_word_index(g.s, bh, row, 0);
}

// Forward: the word of keys key0 … key0 + 31 (key0 % 32 == 0) of rows row_base + 8·h is the
// union of its quad's kept[h]; lane t gathers row t % 2's and stores it through `keep_row`
// (keep_row_of_lane). Warp-uniform (shuffles).
__device__ __forceinline__ void store_keep_words(std::uint32_t* keep_row, std::int64_t key0,
                                                 const std::uint32_t kept[2]) {
  const int odd = static_cast<int>(threadIdx.x) % 2;
  const std::uint32_t row0 = kept[0] | __shfl_xor_sync(0xFFFFFFFFu, kept[0], 2);
  const std::uint32_t row1 = kept[1] | __shfl_xor_sync(0xFFFFFFFFu, kept[1], 2);
  const std::uint32_t word =
      (odd ? row1 : row0) | __shfl_xor_sync(0xFFFFFFFFu, odd ? row0 : row1, 1);
  if (keep_row != nullptr) keep_row[key0 / 32] = word;
}

// The word holding key `key` of `row` (0 past the end).
__device__ __forceinline__ std::uint32_t load_keep_word(const attention_detail::Geometry& g,
                                                        std::int64_t bh, std::int64_t row,
                                                        std::int64_t key) {
  return row < g.s ? g.dropout.keep_bits[attention_detail::keep_word_index(g.s, bh, row, key)] : 0u;
}

// Two neighbouring words as one 8-byte access.
struct alignas(8) WordPair {
  std::uint32_t x, y;
};

// The words of keys key0 … key0 + 63 (key0 % 64 == 0) of `row` (zeros past the end): one 8-byte
// load, as keep_words is even.
__device__ __forceinline__ WordPair load_keep_pair(const attention_detail::Geometry& g,
                                                   std::int64_t bh, std::int64_t row,
                                                   std::int64_t key0) {
  if (row >= g.s) return {0u, 0u};
  return *reinterpret_cast<const WordPair*>(g.dropout.keep_bits +
                                            attention_detail::keep_word_index(g.s, bh, row, key0));
}

__device__ __forceinline__ float factor_of_bit(const attention_detail::Dropout& d,
                                               std::uint32_t word, int bit) {
  return (word >> bit) & 1u ? d.scale : 0.0f;
}

// The forward/dq layout's factors (as row_dropout's) from the word holding key0 (key0 % 16 == 0).
__device__ __forceinline__ void row_factors_from_bits(float f[2][2],
                                                      const attention_detail::Dropout& d,
                                                      std::uint32_t word, std::int64_t key0) {
  const int base = static_cast<int>(key0 % 32) + 2 * (static_cast<int>(threadIdx.x) % 4);
#pragma unroll
  for (int tile = 0; tile < 2; ++tile) {
#pragma unroll
    for (int c = 0; c < 2; ++c) f[tile][c] = factor_of_bit(d, word, base + 8 * tile + c);
  }
}

// The dk/dv layout's factors (as column_dropout's): words.x and .y hold queries query0 and
// query0 + 1, and key key_base + g + 8·h sits at bit `bit0` + 8·h of them.
__device__ __forceinline__ void column_factors_from_bits(float f[2][2],
                                                         const attention_detail::Dropout& d,
                                                         WordPair words, int bit0) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    f[0][h] = factor_of_bit(d, words.x, bit0 + 8 * h);
    f[1][h] = factor_of_bit(d, words.y, bit0 + 8 * h);
  }
}

}  // namespace mds::kernels::attention_tc_detail
