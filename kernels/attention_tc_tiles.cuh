// The building blocks of the tensor-core attention kernels (attention_tc_kernels.cuh): 16-bit
// tiles in shared memory, mma fragments loaded from them with ldmatrix, the two warp-level
// products every kernel is made of and the backward's row statistics.
// Plain CUDA with no runtime includes, so the CPU unit tests can run it under the SIMT emulation
// (tests/unit/simt_mma_emulation.h).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/attention_kernels.cuh"
#include "kernels/mma.cuh"

namespace mds::kernels::attention_tc_detail {

// The SIMT kernels' slice strides and dropout numbering: both kernel families draw the same masks.
using attention_detail::Dropout;
using attention_detail::Geometry;

// The softmax runs in base 2: z·log2(e) is one multiply-add away from the scores, and exp2f is a
// single MUFU instruction where expf takes several (the kernels are bound by their per-element
// instructions more than by the mma: Nsight Compute on an H100, docs/performance.md).
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Four warps per block; each owns 16 rows of the block's 64 (query rows in the forward and the dq
// kernel, keys in the dk/dv kernel): the m16 of one mma.
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kWarpRows = 16;
constexpr int kBlockRows = kWarps * kWarpRows;

// Tiles hold rows of kHn 16-bit elements with a stride of kHn + 8: the 16 bytes of padding move
// each row four banks on, so the eight 16-byte rows of one ldmatrix matrix (and the 16-byte
// chunks a quarter-warp of cp.async writes) fall in distinct banks; rows stay 16-byte aligned.
template <int kHn>
constexpr int kLd = kHn + 8;

template <int kHn, int kRows>
constexpr int kTileElems = kRows* kLd<kHn>;

// Copies rows [first, first + kRows) of a strided [s, kHn] view (16-bit elements, 16-byte aligned
// rows) into a tile with cp.async, one 16-byte chunk per operation; rows past the end become
// zeros, so that a zero probability times them stays zero (not 0·NaN). The caller commits.
template <int kHn, int kRows>
__device__ __forceinline__ void load_tile_async(std::uint16_t* tile, const std::uint16_t* src,
                                                std::int64_t ld, std::int64_t first,
                                                std::int64_t s) {
  constexpr int kChunks = kHn / 8;
  static_assert((kRows * kChunks) % kThreads == 0, "whole passes of the block");
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int pass = 0; pass < kRows * kChunks / kThreads; ++pass) {
    const int e = pass * kThreads + tid, r = e / kChunks, c = e % kChunks;
    const std::int64_t row = first + r;
    const bool inside = row < s;
    mma::cp_async_16(tile + r * kLd<kHn> + c * 8, src + (inside ? row : first) * ld + c * 8,
                     inside);
  }
}

__device__ __forceinline__ int lane_id() {
  return static_cast<int>(threadIdx.x) % 32;
}

// The A fragment of rows [row0, row0 + 16) × columns [col0, col0 + 16) of a row-major tile:
// ldmatrix's matrices 0 … 3 are (rows +0, cols +0), (rows +8, cols +0), (rows +0, cols +8),
// (rows +8, cols +8), which are a[0] … a[3] of the layout.
template <int kHn>
__device__ __forceinline__ void load_a(std::uint32_t a[4], const std::uint16_t* tile, int row0,
                                       int col0) {
  const int lane = lane_id(), matrix = lane / 8;
  mma::ldmatrix_x4(
      a, tile + (row0 + 8 * (matrix & 1) + lane % 8) * kLd<kHn> + col0 + 8 * (matrix >> 1));
}

// The same A fragment (A = rows [row0, row0 + 16) × columns [col0, col0 + 16)) from a tile that
// holds Aᵀ row-major (its row c is column c of A, as the stored dSᵀ for dS·k): .trans turns each
// 8×8 block back. Matrix i is A's block (rows +8·(i & 1), cols +8·(i >> 1)), which is the tile's
// (rows col0 + 8·(i >> 1) …, columns row0 + 8·(i & 1) …).
template <int kHn>
__device__ __forceinline__ void load_a_transposed(std::uint32_t a[4], const std::uint16_t* tile,
                                                  int row0, int col0) {
  const int lane = lane_id(), matrix = lane / 8;
  mma::ldmatrix_x4_trans(
      a, tile + (col0 + 8 * (matrix >> 1) + lane % 8) * kLd<kHn> + row0 + 8 * (matrix & 1));
}

// B fragments of the n-tiles [n0, n0 + 8) (b[0]) and [n0 + 8, n0 + 16) (b[1]) over k in
// [k0, k0 + 16), from a tile whose row n holds column n of B (B = tileᵀ, as kᵀ in q·kᵀ): a row of
// a plain ldmatrix matrix is then a column of B, which is the col layout. Matrices: (n +0, k +0),
// (n +0, k +8), (n +8, k +0), (n +8, k +8).
template <int kHn>
__device__ __forceinline__ void load_b_transposed(std::uint32_t b[2][2], const std::uint16_t* tile,
                                                  int n0, int k0) {
  const int lane = lane_id(), matrix = lane / 8;
  std::uint32_t r[4];
  mma::ldmatrix_x4(r,
                   tile + (n0 + 8 * (matrix >> 1) + lane % 8) * kLd<kHn> + k0 + 8 * (matrix & 1));
  b[0][0] = r[0];
  b[0][1] = r[1];
  b[1][0] = r[2];
  b[1][1] = r[3];
}

// The same fragments from a tile whose row k holds row k of B (as v in p·v): .trans turns each
// 8×8 block's rows into B's columns. Matrices: (k +0, n +0), (k +8, n +0), (k +0, n +8),
// (k +8, n +8).
template <int kHn>
__device__ __forceinline__ void load_b(std::uint32_t b[2][2], const std::uint16_t* tile, int k0,
                                       int n0) {
  const int lane = lane_id(), matrix = lane / 8;
  std::uint32_t r[4];
  mma::ldmatrix_x4_trans(
      r, tile + (k0 + 8 * (matrix & 1) + lane % 8) * kLd<kHn> + n0 + 8 * (matrix >> 1));
  b[0][0] = r[0];
  b[0][1] = r[1];
  b[1][0] = r[2];
  b[1][1] = r[3];
}

// The products below for kAtoms m16 atoms of a warp at once (atom i: the accumulator
// acc_of(i), A rows row0 + i·atom_stride …): each B fragment is loaded once for all of them, and
// each accumulator sees the same mma sequence as with one atom (the same bits).

// acc_of(i) (16 × kN, n-tiles of 8) += rows [row0 + i·atom_stride, … + 16) of a_tile · (rows
// [0, kN) of b_tile)ᵀ, both tiles [rows][kHn]: q·kᵀ, dO·vᵀ and, with keys as rows, k·qᵀ and v·dOᵀ.
template <typename T, int kHn, int kN, int kAtoms, typename AccOf>
__device__ __forceinline__ void warp_product_abt_atoms(AccOf acc_of, const std::uint16_t* a_tile,
                                                       int row0, int atom_stride,
                                                       const std::uint16_t* b_tile) {
#pragma unroll
  for (int kk = 0; kk < kHn / 16; ++kk) {
    std::uint32_t a[kAtoms][4];
#pragma unroll
    for (int i = 0; i < kAtoms; ++i) load_a<kHn>(a[i], a_tile, row0 + i * atom_stride, 16 * kk);
#pragma unroll
    for (int np = 0; np < kN / 16; ++np) {
      std::uint32_t b[2][2];
      load_b_transposed<kHn>(b, b_tile, 16 * np, 16 * kk);
#pragma unroll
      for (int i = 0; i < kAtoms; ++i) {
        mma::mma_16816<T>(acc_of(i)[2 * np], a[i], b[0]);
        mma::mma_16816<T>(acc_of(i)[2 * np + 1], a[i], b[1]);
      }
    }
  }
}

// One atom: acc (16 × kN) += rows [row0, row0 + 16) of a_tile · (rows [0, kN) of b_tile)ᵀ.
template <typename T, int kHn, int kN>
__device__ __forceinline__ void warp_product_abt(float (&acc)[kN / 8][4],
                                                 const std::uint16_t* a_tile, int row0,
                                                 const std::uint16_t* b_tile) {
  warp_product_abt_atoms<T, kHn, kN, 1>([&](int) -> float(&)[kN / 8][4] { return acc; }, a_tile,
                                        row0, 0, b_tile);
}

// acc_of(i) (16 × kHn) += A_i · rows [0, kK) of tile ([kK][kHn]), where a_chunk(i, kc, a) gives
// A_i's k-chunk kc (columns 16·kc …) as an A fragment: the k-chunks in order, each against the
// n-tiles in order.
template <typename T, int kHn, int kK, int kAtoms, typename AccOf, typename AChunk>
__device__ __forceinline__ void warp_product_ab_atoms(AccOf acc_of, AChunk a_chunk,
                                                      const std::uint16_t* tile) {
#pragma unroll
  for (int kc = 0; kc < kK / 16; ++kc) {
    std::uint32_t a[kAtoms][4];
#pragma unroll
    for (int i = 0; i < kAtoms; ++i) a_chunk(i, kc, a[i]);
#pragma unroll
    for (int dp = 0; dp < kHn / 16; ++dp) {
      std::uint32_t b[2][2];
      load_b<kHn>(b, tile, 16 * kc, 16 * dp);
#pragma unroll
      for (int i = 0; i < kAtoms; ++i) {
        mma::mma_16816<T>(acc_of(i)[2 * dp], a[i], b[0]);
        mma::mma_16816<T>(acc_of(i)[2 * dp + 1], a[i], b[1]);
      }
    }
  }
}

// One atom: acc (16 × kHn) += A · rows [0, kK) of tile, A's k-chunks from a_chunk(kc, a).
template <typename T, int kHn, int kK, typename AChunk>
__device__ __forceinline__ void warp_product_ab(float (&acc)[kHn / 8][4], AChunk a_chunk,
                                                const std::uint16_t* tile) {
  warp_product_ab_atoms<T, kHn, kK, 1>([&](int) -> float(&)[kHn / 8][4] { return acc; },
                                       [&](int, int kc, std::uint32_t(&a)[4]) { a_chunk(kc, a); },
                                       tile);
}

// P (16 × kK) in accumulator layout as an A fragment rounded to T: its n-tiles 2c and 2c + 1 are
// k-chunk c, so P never goes through shared memory.
template <typename T, int kK>
__device__ __forceinline__ void pack_a_chunk(std::uint32_t (&a)[4], const float (&p)[kK / 8][4],
                                             int kc) {
  a[0] = mma::pack2<T>(p[2 * kc][0], p[2 * kc][1]);
  a[1] = mma::pack2<T>(p[2 * kc][2], p[2 * kc][3]);
  a[2] = mma::pack2<T>(p[2 * kc + 1][0], p[2 * kc + 1][1]);
  a[3] = mma::pack2<T>(p[2 * kc + 1][2], p[2 * kc + 1][3]);
}

// warp_product_ab with P given in accumulator layout (pack_a_chunk): p·v, pᵀ·dO, dSᵀ·q and dS·k;
// the atoms form takes atom i's P from p_of(i).
template <typename T, int kHn, int kK, int kAtoms, typename AccOf, typename POf>
__device__ __forceinline__ void warp_product_pb_atoms(AccOf acc_of, POf p_of,
                                                      const std::uint16_t* tile) {
  warp_product_ab_atoms<T, kHn, kK, kAtoms>(
      acc_of, [&](int i, int kc, std::uint32_t(&a)[4]) { pack_a_chunk<T, kK>(a, p_of(i), kc); },
      tile);
}

template <typename T, int kHn, int kK>
__device__ __forceinline__ void warp_product_pb(float (&acc)[kHn / 8][4],
                                                const float (&p)[kK / 8][4],
                                                const std::uint16_t* tile) {
  warp_product_ab<T, kHn, kK>(
      acc, [&](int kc, std::uint32_t(&a)[4]) { pack_a_chunk<T, kK>(a, p, kc); }, tile);
}

// Element e of an accumulator n-tile sits at row (lane / 4) + 8·(e / 2), column 2·(lane % 4) +
// (e % 2) of the 16 × 8 tile.
__device__ __forceinline__ int accumulator_row(int e) {
  return lane_id() / 4 + 8 * (e >> 1);
}

__device__ __forceinline__ int accumulator_col(int e) {
  return 2 * (lane_id() % 4) + (e & 1);
}

// The backward's per-row statistics of the kRows query rows at i0 (do_s: their dctx tile):
// lse_s[r] (the forward's, times log2(e): pair_gradient works in base 2) and delta_s[r] = dctx_r ·
// ctx_r in fp32 from the 16-bit values (as FlashAttention-2, from the stored ctx); zeros past the
// end. kThreads / kRows adjacent lanes share a row, each reading a contiguous span of ctx in
// 16-byte loads, combined by a butterfly.
template <typename T, int kHn, int kRows>
__device__ __forceinline__ void row_statistics(float* lse_s, float* delta_s,
                                               const std::uint16_t* do_s, const std::uint16_t* ctx,
                                               const float* lse, std::int64_t bh, std::int64_t i0,
                                               const Geometry& g) {
  constexpr int kParts = kThreads / kRows, kSpan = kHn / kParts;
  static_assert(kParts >= 1 && kParts <= 32 && kSpan % 8 == 0, "16-byte spans within a warp");
  const int tid = static_cast<int>(threadIdx.x), r = tid / kParts, part = tid % kParts;
  const std::int64_t row = i0 + r;
  float partial = 0.0f;
  if (row < g.s) {
    const std::uint16_t* o = ctx + row * g.ctx_ld + bh * kHn + part * kSpan;
    const std::uint16_t* d = do_s + r * kLd<kHn> + part * kSpan;
#pragma unroll
    for (int c = 0; c < kSpan / 8; ++c) {
      const mma::Chunk16 chunk = mma::load_16(o + 8 * c);
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        partial += mma::widen<T>(d[8 * c + 2 * w]) * mma::widen_low<T>(chunk.w[w]);
        partial += mma::widen<T>(d[8 * c + 2 * w + 1]) * mma::widen_high<T>(chunk.w[w]);
      }
    }
  }
  for (int delta = 1; delta < kParts; delta *= 2) {
    partial += __shfl_xor_sync(0xFFFFFFFFu, partial, delta);
  }
  if (part == 0) {
    delta_s[r] = partial;
    lse_s[r] = row < g.s ? lse[bh * g.s + row] * kLog2e : 0.0f;
  }
}

// Row `row`'s statistics for dkdv_kernel (zeros past the end): lse·log2(e), as row_statistics
// gives it, and the delta dq_kernel stored.
__device__ __forceinline__ void fetch_row_statistics(float& lse2, float& row_delta,
                                                     const float* lse, const float* delta,
                                                     std::int64_t bh, std::int64_t row,
                                                     const Geometry& g) {
  const bool inside = row < g.s;
  lse2 = inside ? lse[bh * g.s + row] * kLog2e : 0.0f;
  row_delta = inside ? delta[bh * g.s + row] : 0.0f;
}

// dqkv[i] += value for two neighbouring elements: widened, added in fp32, rounded once; or, when
// !accumulate, dqkv[i] = value rounded (dqkv not read).
template <typename T>
__device__ __forceinline__ void write_pair(std::uint16_t* out, float lo, float hi,
                                           bool accumulate) {
  auto* word = reinterpret_cast<std::uint32_t*>(out);
  if (accumulate) {
    const std::uint32_t old = *word;
    *word = mma::pack2<T>(mma::widen_low<T>(old) + lo, mma::widen_high<T>(old) + hi);
  } else {
    *word = mma::pack2<T>(lo, hi);
  }
}

}  // namespace mds::kernels::attention_tc_detail
