// Device code of the tensor-core flash attention (launched from kernels/attention_tc.cu): the
// kernels of attention_kernels.cuh with the same layouts, scaling, causal mask, dropout numbering,
// lse and `dqkv +=` (or `dqkv =`), for bf16/fp16 activations and head dims 64 and 128, computing
// every product with mma.sync m16n8k16 (16-bit operands, fp32 accumulation) in FlashAttention-2's
// structure:
//
//  - forward: one block per (64 query rows, slice); warp w owns rows 16w … 16w + 15 and walks the
//    key tiles of 64 (K and V double-buffered by cp.async): S = q·kᵀ by mma, the online softmax
//    in registers (a row lives in the four lanes of a quad: two shuffles for its max), P rounded
//    to the 16-bit type and reused from registers as the A operand of O += P·V, lse per row;
//  - backward, deterministic without atomics: one block per 64 query rows accumulating dq over
//    the key tiles up to its diagonal (and storing its rows' delta = dctx·ctx), then one block per
//    64 keys (warp w owns 16 of them) accumulating dk and dv over the query tiles from its
//    diagonal on, reading those deltas; both recompute p = exp(z − lse) and
//    dS/coeff = p·(dp − delta), and round P and dS/coeff to the 16-bit type for their products
//    (coeff scales the sums at the end, with α).
//
// So besides summation order, the results differ from "fp32 then one rounding" by the roundings
// of P (ctx, dv) and dS (dq, dk) to 16 bits; docs/cuda.md derives the bounds the tests check.
// Plain CUDA with no runtime includes, like attention_kernels.cuh, so that
// tests/unit/kernels_emulated_attention_tc_test.cpp runs it on the CPU.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/attention_tc_dropout.cuh"
#include "kernels/attention_tc_tiles.cuh"

namespace mds::kernels::attention_tc_detail {

// Rows of the tile the backward kernels step over: query rows in the dk/dv kernel, keys in the dq
// kernel (the block owns 64 of the other). 32 at hn = 128 keeps dk, dv (or dq) and two 16 × step
// accumulators within the register file.
template <int kHn>
constexpr int kBackwardStep = kHn <= 64 ? 64 : 32;

// Blocks per SM the register allocation must allow (__launch_bounds__' second argument): four
// forward blocks at hn = 64 (128 registers a thread, no spills), two elsewhere (up to 255 a
// thread: left to itself, ptxas capped the dq kernel at 168 and spilled).
template <int kHn, int kAtoms = 1>
constexpr int kForwardMinBlocks = kHn <= 64 && kAtoms == 1 ? 4 : 2;
constexpr int kBackwardMinBlocks = 2;

// The forward and dq_from_ds_kernel may also give each warp two m16 atoms of query rows
// (AttentionKernel::kTensorCoreTrialShapes at hn = 64, a trial against the default one): blocks
// of 128 rows, warp w owning rows 16w … and 64 + 16w …, so that each k (and v) fragment loaded
// from shared memory serves two mma instead of one (the forward at two blocks an SM instead of
// four). A row's arithmetic is the same either way (the same bits).
template <int kAtoms>
constexpr int kAtomBlockRows = kAtoms* kBlockRows;

// Dynamic shared memory of each kernel, in bytes.
template <int kHn, int kAtoms = 1>
constexpr int kForwardSharedBytes =
    2 * kTileElems<kHn, kBlockRows*(kAtoms + 4)>;  // q; two stages of k, v
template <int kHn>
constexpr int kBackwardSharedBytes =
    2 * kTileElems<kHn, 2 * kBlockRows + 4 * kBackwardStep<kHn>> + 4 * 4 * kBlockRows;

// The dk/dv kernel may also step over 32 query rows at hn = 64 (kTensorCoreTrialShapes): its Sᵀ
// and dPᵀ then take half the registers, so ptxas fits three blocks an SM (168 registers) instead
// of two (255). The products come in the same order either way (16-row k-chunks of the queries,
// in order), so the bits are the same.
template <int kHn, int kQueries>
constexpr int kDkdvMinBlocks = kHn == 64 && kQueries == 32 ? 3 : kBackwardMinBlocks;
template <int kHn, int kQueries>
constexpr int kDkdvSharedBytes =
    2 * kTileElems<kHn, 2 * kBlockRows + 4 * kQueries> + 4 * 4 * kBlockRows;

// ALiBi (Geometry::key_bias) in score units: z = coeff·α·(q·k + bias/(coeff·α)), so the kernels
// add key j's bias times bias_scale = 1/(coeff·α) to each raw score S = q·k of key j and go on
// as without a bias (the CPU's coeff·(bias/coeff + α·q·k) up to roundings). Keys past the end
// take 0: they are masked, or in rows past the end.
__device__ __forceinline__ float score_bias(const Geometry& g, std::int64_t bh, std::int64_t key,
                                            float bias_scale) {
  return key < g.s ? g.key_bias[(bh % g.dropout.np) * g.s + key] * bias_scale : 0.0f;
}

// Adds the bias of key j0 + column to a warp's accumulator tiles of raw scores (rows: queries,
// columns: keys), when there is one.
template <int kKeys>
__device__ __forceinline__ void add_key_bias_by_column(float (&scores)[kKeys / 8][4],
                                                       const Geometry& g, std::int64_t bh,
                                                       std::int64_t j0, float bias_scale) {
  if (g.key_bias == nullptr) return;
#pragma unroll
  for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const float bias = score_bias(g, bh, j0 + 8 * nt + accumulator_col(c), bias_scale);
      scores[nt][c] += bias;
      scores[nt][2 + c] += bias;
    }
  }
}

// ---- forward --------------------------------------------------------------------------------

// One m16 atom's rows through one key tile of the forward, after S = q·kᵀ is in p: keys past the
// row masked (in the atom's diagonal tile only), the online softmax in the z·log2(e) domain (m, l:
// a lane's rows row_base and row_base + 8; o rescaled; p becomes the probabilities), then the
// dropout's
// factors on p (read from kept_in with kReadBits; otherwise drawn, and their bits stored through
// keep_row when it is set). `local` is the lane's first row less the diagonal tile's first key.
template <int kHn, int kKeys, bool kReadBits>
__device__ __forceinline__ void forward_softmax_tile(
    float (&p)[kKeys / 8][4], float (&m)[2], float (&l)[2], float (&o)[kHn / 8][4], bool diagonal,
    int local, const WordPair (&kept_in)[2], std::uint32_t* keep_row, std::int64_t row_base,
    std::int64_t j0, std::int64_t bh, const Geometry& g, float scale2) {
  // Keys past the row masked, in the diagonal tile only (the tiles before it lie wholly before
  // every row; j0 ≤ the atom's first row keeps each row's first key: finite maxima).
  if (diagonal) {
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (8 * nt + accumulator_col(e) > local + 8 * (e >> 1)) p[nt][e] = -INFINITY;
      }
    }
  }
  // In the z·log2(e) domain, z = coeff·α·q·k = S·scale2 (scale2 > 0): the running maximum m is
  // the scaled maximum of the raw scores (scaling and rounding keep their order), and each
  // exponent is one fused multiply-add from S, as the backward recomputes it.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
      tile_max = fmaxf(tile_max, fmaxf(p[nt][2 * h], p[nt][2 * h + 1]));
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xFFFFFFFFu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xFFFFFFFFu, tile_max, 2));
    const float m_new = fmaxf(m[h], tile_max * scale2);
    const float rescale = exp2f(m[h] - m_new);  // first tile: 2^−inf = 0
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        p[nt][e] = exp2f(fmaf(p[nt][e], scale2, -m_new));  // masked: 2^−inf = 0
        sum += p[nt][e];
      }
    }
    l[h] = l[h] * rescale + sum;  // this thread's part of the row's sum
    m[h] = m_new;
#pragma unroll
    for (int dt = 0; dt < kHn / 8; ++dt) {
      o[dt][2 * h] *= rescale;
      o[dt][2 * h + 1] *= rescale;
    }
  }
  // The normalizer sums the kept and the dropped probabilities; only P·V sees the mask (masked
  // keys and rows past the end are multiplied too, harmlessly). The keep bits go out a word of
  // 32 keys at a time.
  if (kReadBits) {
#pragma unroll
    for (int np = 0; np < kKeys / 16; ++np) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float f[2][2];
        row_factors_from_bits(f, g.dropout, np < 2 ? kept_in[h].x : kept_in[h].y, 16 * np);
#pragma unroll
        for (int tile = 0; tile < 2; ++tile) {
          p[2 * np + tile][2 * h] *= f[tile][0];
          p[2 * np + tile][2 * h + 1] *= f[tile][1];
        }
      }
    }
  } else if (g.dropout.p > 0.0f) {
#pragma unroll
    for (int w = 0; w < kKeys / 32; ++w) {
      std::uint32_t kept[2] = {0u, 0u};
#pragma unroll
      for (int np = 2 * w; np < 2 * w + 2; ++np) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float f[2][2];
          row_dropout(f, g, bh, row_base + 8 * h, j0 + 16 * np);
#pragma unroll
          for (int tile = 0; tile < 2; ++tile) {
            p[2 * np + tile][2 * h] *= f[tile][0];
            p[2 * np + tile][2 * h + 1] *= f[tile][1];
          }
          kept[h] |= quad_keep_bits(f, 16 * np);
        }
      }
      if (g.dropout.keep_bits != nullptr) store_keep_words(keep_row, j0 + 32 * w, kept);
    }
  }
}

// With kReadBits the dropout's keep bits are already drawn (draw_keep_bits_kernel) and the
// kernel reads its factors from them; otherwise it draws them and, given keep_bits, stores them.
// kAtoms m16 atoms of query rows per warp (kAtomBlockRows).
template <typename T, int kHn, bool kReadBits, int kAtoms = 1>
__global__ void __launch_bounds__(kThreads, (kForwardMinBlocks<kHn, kAtoms>))
    forward_kernel(std::uint16_t* ctx, float* lse, const std::uint16_t* qkv, Geometry g,
                   float alpha, float coeff) {
  static_assert(kHn == 64 || kHn == 128, "head dims 64 and 128");
  static_assert(kAtoms == 1 || (kAtoms == 2 && kHn == 64), "two atoms a warp at hn = 64 only");
  constexpr int kKeys = kBlockRows;  // keys per tile: an atom's diagonal tile is its last one
  constexpr int kRows = kAtomBlockRows<kAtoms>;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* q_s = reinterpret_cast<std::uint16_t*>(smem);
  std::uint16_t* kv_s = q_s + kTileElems<kHn, kRows>;  // stage: k tile, then v tile

  const std::int64_t bh = blockIdx.x;
  // The last query tiles see the most keys: start them first.
  const std::int64_t i0 = static_cast<std::int64_t>(gridDim.y - 1 - blockIdx.y) * kRows;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const std::uint16_t* q = qkv + bh * 3 * kHn;
  const std::uint16_t* k = q + kHn;
  const std::uint16_t* v = q + 2 * kHn;
  load_tile_async<kHn, kRows>(q_s, q, g.qkv_ld, i0, g.s);
  load_tile_async<kHn, kKeys>(kv_s, k, g.qkv_ld, 0, g.s);
  load_tile_async<kHn, kKeys>(kv_s + kTileElems<kHn, kKeys>, v, g.qkv_ld, 0, g.s);
  mma::cp_async_commit();

  // This thread's rows in atom a: row_base[a] + 8·h, h = 0, 1 (accumulator elements 2h, 2h + 1),
  // with row_base[a] = i0 + 64·a + local.
  const int local = kWarpRows * warp + accumulator_row(0);
  std::int64_t row_base[kAtoms];
  std::uint32_t* keep_row[kAtoms];
#pragma unroll
  for (int a = 0; a < kAtoms; ++a) {
    row_base[a] = i0 + kBlockRows * a + local;
    keep_row[a] = !kReadBits && g.dropout.keep_bits != nullptr
                      ? keep_row_of_lane(g, bh, row_base[a])
                      : nullptr;
  }
  const float scale2 = alpha * coeff * kLog2e;  // z·log2(e) = S·scale2
  const float bias_scale = 1.0f / (alpha * coeff);
  float o[kAtoms][kHn / 8][4] = {};
  float m[kAtoms][2], l[kAtoms][2];  // m equal across the quad
#pragma unroll
  for (int a = 0; a < kAtoms; ++a) {
    m[a][0] = m[a][1] = -INFINITY;
    l[a][0] = l[a][1] = 0.0f;
  }
  const std::int64_t last_row = (i0 + kRows < g.s ? i0 + kRows : g.s) - 1;
  const int tiles = static_cast<int>(last_row / kKeys) + 1;
  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) {  // prefetch the next k, v into the other stage (free since the last sync)
      std::uint16_t* next = kv_s + ((j + 1) & 1) * 2 * kTileElems<kHn, kKeys>;
      load_tile_async<kHn, kKeys>(next, k, g.qkv_ld, (j + 1) * kKeys, g.s);
      load_tile_async<kHn, kKeys>(next + kTileElems<kHn, kKeys>, v, g.qkv_ld, (j + 1) * kKeys, g.s);
      mma::cp_async_commit();
      mma::cp_async_wait<1>();
    } else {
      mma::cp_async_wait<0>();
    }
    __syncthreads();
    const std::uint16_t* k_s = kv_s + (j & 1) * 2 * kTileElems<kHn, kKeys>;
    const std::uint16_t* v_s = k_s + kTileElems<kHn, kKeys>;
    const std::int64_t j0 = static_cast<std::int64_t>(j) * kKeys;
    // With two atoms the block's last tile lies past the first atom's diagonal: the second
    // alone takes it (warp-uniform).
    const int first = kAtoms == 2 && j0 > i0 ? 1 : 0;

    WordPair kept_in[kAtoms][2] = {};  // kReadBits: the words of this thread's rows
    if constexpr (kReadBits) {
#pragma unroll
      for (int a = 0; a < kAtoms; ++a) {
        if (a < first) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) kept_in[a][h] = load_keep_pair(g, bh, row_base[a] + 8 * h, j0);
      }
    }
    float p[kAtoms][kKeys / 8][4] = {};
    const auto p_of = [&](int a) -> float(&)[kKeys / 8][4] { return p[a]; };
    const auto o_of = [&](int a) -> float(&)[kHn / 8][4] { return o[a]; };
    if (first == 0) {
      warp_product_abt_atoms<T, kHn, kKeys, kAtoms>(p_of, q_s, kWarpRows * warp, kBlockRows, k_s);
    } else {
      warp_product_abt<T, kHn, kKeys>(p[kAtoms - 1], q_s, kBlockRows + kWarpRows * warp, k_s);
    }
#pragma unroll
    for (int a = 0; a < kAtoms; ++a) {
      if (a < first) continue;
      const std::int64_t atom_i0 = i0 + kBlockRows * a;
      add_key_bias_by_column<kKeys>(p[a], g, bh, j0, bias_scale);
      forward_softmax_tile<kHn, kKeys, kReadBits>(p[a], m[a], l[a], o[a], j0 == atom_i0, local,
                                                  kept_in[a], keep_row[a], row_base[a], j0, bh, g,
                                                  scale2);
    }
    if (first == 0) {
      warp_product_pb_atoms<T, kHn, kKeys, kAtoms>(o_of, p_of, v_s);
    } else {
      warp_product_pb<T, kHn, kKeys>(o[kAtoms - 1], p[kAtoms - 1], v_s);
    }
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }

#pragma unroll
  for (int a = 0; a < kAtoms; ++a) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[a][h];
      sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
      sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
      const std::int64_t row = row_base[a] + 8 * h;
      if (row >= g.s) continue;
      if (lane_id() % 4 == 0) lse[bh * g.s + row] = m[a][h] * kLn2 + logf(sum);  // m: base 2
      std::uint16_t* out = ctx + row * g.ctx_ld + bh * kHn + accumulator_col(0);
#pragma unroll
      for (int dt = 0; dt < kHn / 8; ++dt) {
        *reinterpret_cast<std::uint32_t*>(out + 8 * dt) =
            mma::pack2<T>(o[a][dt][2 * h] / sum, o[a][dt][2 * h + 1] / sum);
      }
    }
  }
}

// ---- backward -------------------------------------------------------------------------------

// One part of dqkv (offset 0: dq, hn: dk, 2·hn: dv) of this thread's rows row_base and row_base + 8
// from the accumulators, scaled: += (or, when !accumulate, =), widened, added in fp32, rounded
// once.
template <typename T, int kHn>
__device__ __forceinline__ void write_gradient_rows(std::uint16_t* dqkv, int offset,
                                                    const float (&acc)[kHn / 8][4],
                                                    std::int64_t row_base, std::int64_t bh,
                                                    const Geometry& g, float scale,
                                                    bool accumulate) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const std::int64_t row = row_base + 8 * h;
    if (row >= g.s) continue;
    std::uint16_t* out = dqkv + row * g.qkv_ld + bh * 3 * kHn + offset + accumulator_col(0);
#pragma unroll
    for (int dt = 0; dt < kHn / 8; ++dt) {
      write_pair<T>(out + 8 * dt, scale * acc[dt][2 * h], scale * acc[dt][2 * h + 1], accumulate);
    }
  }
}

// dS (and p) of one accumulator element, as attention_detail::pair_gradients: p = exp(z − lse)
// = 2^(S·scale2 − lse2) (scale2 = α·coeff·log2(e), lse2 = lse·log2(e): row_statistics),
// dS/coeff = p·(dp·f − delta) with f the dropout factor (1 without dropout), its inner term one
// fused multiply-add; p·f is what dv needs. coeff joins α in the scale the products' sums take at
// the end (dk and dq = α·coeff·Σ (dS/coeff)·…), which saves two multiplies an element. The
// callers zero masked pairs.
struct PairGradient {
  float p, ds;
};

// Two neighbouring floats as one 8-byte load (float2 without the CUDA headers).
struct alignas(8) FloatPair {
  float x, y;
};

__device__ __forceinline__ PairGradient pair_gradient(float score, float dp, float row_lse2,
                                                      float row_delta, float factor, float scale2) {
  const float p = exp2f(fmaf(score, scale2, -row_lse2));
  return {p * factor, p * fmaf(dp, factor, -row_delta)};
}

// dk and dv of 64 keys: block (slice, key tile) walks the query tiles from its diagonal to the
// end; warp w owns keys 16w … 16w + 15 and computes Sᵀ = k·qᵀ and dPᵀ = v·dOᵀ, so that pᵀ and dSᵀ
// are A operands of dv += pᵀ·dO and dk += dSᵀ·q straight from registers. Each step's row
// statistics (lse, and delta as dq_kernel or row_delta_kernel stored it) are loaded into
// registers a step ahead. With kStoreDs it also stores dSᵀ/coeff, rounded to T as its products
// round it, at ds[(bh·s + key)·ds_ld + query] for dq_from_ds_kernel (pairs of queries < s, keys
// < s).
template <typename T, int kHn, bool kStoreDs, int kQueries = kBackwardStep<kHn>>
__global__ void __launch_bounds__(kThreads, (kDkdvMinBlocks<kHn, kQueries>))
    dkdv_kernel(std::uint16_t* dqkv, const std::uint16_t* dctx, const float* lse,
                const float* delta, const std::uint16_t* qkv, Geometry g, float alpha, float coeff,
                bool accumulate, std::uint16_t* ds, std::int64_t ds_ld) {
  static_assert(kHn == 64 || kHn == 128, "head dims 64 and 128");
  static_assert(kQueries == 32 || kQueries == 64, "steps of 32 or 64 query rows");
  extern __shared__ __align__(16) unsigned char smem[];
  auto* k_s = reinterpret_cast<std::uint16_t*>(smem);
  std::uint16_t* v_s = k_s + kTileElems<kHn, kBlockRows>;
  std::uint16_t* qdo_s = v_s + kTileElems<kHn, kBlockRows>;  // stage: q tile, then dO tile
  auto* lse_s = reinterpret_cast<float*>(qdo_s + 4 * kTileElems<kHn, kQueries>);
  float* delta_s = lse_s + kBlockRows;
  // The step's keep bits: word w of the block's keys for query i0 + q at keep_s[w·kQueries + q].
  auto* keep_s = reinterpret_cast<std::uint32_t*>(delta_s + kBlockRows);

  const std::int64_t bh = blockIdx.x;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.y) * kBlockRows;  // heavy first
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const std::uint16_t* q = qkv + bh * 3 * kHn;
  const std::uint16_t* dout = dctx + bh * kHn;
  load_tile_async<kHn, kBlockRows>(k_s, q + kHn, g.qkv_ld, j0, g.s);
  load_tile_async<kHn, kBlockRows>(v_s, q + 2 * kHn, g.qkv_ld, j0, g.s);
  load_tile_async<kHn, kQueries>(qdo_s, q, g.qkv_ld, j0, g.s);
  load_tile_async<kHn, kQueries>(qdo_s + kTileElems<kHn, kQueries>, dout, g.ctx_ld, j0, g.s);
  mma::cp_async_commit();

  const int key_local = kWarpRows * warp + accumulator_row(0);  // key_base − j0
  const std::int64_t key_base = j0 + key_local;
  const float scale2 = alpha * coeff * kLog2e;
  // ALiBi: the bias of this thread's keys key_base + 8·h in score units (score_bias).
  float bias_of_key[2] = {0.0f, 0.0f};
  if (g.key_bias != nullptr) {
    const float bias_scale = 1.0f / (alpha * coeff);
    bias_of_key[0] = score_bias(g, bh, key_base, bias_scale);
    bias_of_key[1] = score_bias(g, bh, key_base + 8, bias_scale);
  }
  const int tid = static_cast<int>(threadIdx.x);  // threads below kQueries load the statistics
  float next_lse2 = 0.0f, next_delta = 0.0f;
  const bool stored_bits = g.dropout.p > 0.0f && g.dropout.keep_bits != nullptr;
  WordPair next_keep{0u, 0u};
  if (tid < kQueries) {
    fetch_row_statistics(next_lse2, next_delta, lse, delta, bh, j0 + tid, g);
    if (stored_bits) next_keep = load_keep_pair(g, bh, j0 + tid, j0);
  }
  float dk[kHn / 8][4] = {}, dv[kHn / 8][4] = {};
  const int steps = static_cast<int>((g.s - j0 + kQueries - 1) / kQueries);
  for (int it = 0; it < steps; ++it) {
    const std::int64_t i0 = j0 + static_cast<std::int64_t>(it) * kQueries;
    // The last step's reads of lse_s and delta_s ended at its closing barrier.
    if (tid < kQueries) {
      lse_s[tid] = next_lse2;
      delta_s[tid] = next_delta;
      keep_s[tid] = next_keep.x;
      keep_s[kQueries + tid] = next_keep.y;
    }
    if (it + 1 < steps) {
      std::uint16_t* next = qdo_s + ((it + 1) & 1) * 2 * kTileElems<kHn, kQueries>;
      load_tile_async<kHn, kQueries>(next, q, g.qkv_ld, i0 + kQueries, g.s);
      load_tile_async<kHn, kQueries>(next + kTileElems<kHn, kQueries>, dout, g.ctx_ld,
                                     i0 + kQueries, g.s);
      mma::cp_async_commit();
      if (tid < kQueries) {
        fetch_row_statistics(next_lse2, next_delta, lse, delta, bh, i0 + kQueries + tid, g);
        if (stored_bits) next_keep = load_keep_pair(g, bh, i0 + kQueries + tid, j0);
      }
      mma::cp_async_wait<1>();
    } else {
      mma::cp_async_wait<0>();
    }
    __syncthreads();
    const std::uint16_t* q_s = qdo_s + (it & 1) * 2 * kTileElems<kHn, kQueries>;
    const std::uint16_t* do_s = q_s + kTileElems<kHn, kQueries>;

    float st[kQueries / 8][4] = {}, dpt[kQueries / 8][4] = {};
    warp_product_abt<T, kHn, kQueries>(st, k_s, kWarpRows * warp, q_s);
    warp_product_abt<T, kHn, kQueries>(dpt, v_s, kWarpRows * warp, do_s);
    if (g.key_bias != nullptr) {  // Sᵀ: a thread's rows are its two keys
#pragma unroll
      for (int nt = 0; nt < kQueries / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) st[nt][e] += bias_of_key[e >> 1];
      }
    }
    // Pairs to zero: keys after their query (the steps overlapping the block's diagonal) and
    // queries past the end (the last step); every other step has none (warp-uniform).
    const bool edge = i0 < j0 + kBlockRows - 1 || i0 + kQueries > g.s;
    const int diagonal_offset = static_cast<int>(i0 - j0);  // key ≤ row: key − j0 ≤ this + local
#pragma unroll
    for (int nt = 0; nt < kQueries / 8; ++nt) {
      const int local0 = 8 * nt + accumulator_col(0);  // element e's query: local0 + (e & 1)
      float f[2][2] = {{1.0f, 1.0f}, {1.0f, 1.0f}};    // [query c][key h]
      if (stored_bits) {
        // This warp's keys j0 + 16·warp + lane / 4 + 8·h: word warp / 2, bits 16·(warp % 2) + ….
        const WordPair words =
            *reinterpret_cast<const WordPair*>(keep_s + (warp / 2) * kQueries + local0);
        column_factors_from_bits(f, g.dropout, words, 16 * (warp % 2) + lane_id() / 4);
      } else if (g.dropout.p > 0.0f) {
        column_dropout(f, g, bh, i0 + local0, j0 + kWarpRows * warp);
      }
      // local0 is even: each query pair's statistics are one 8-byte load.
      const FloatPair pair_lse = *reinterpret_cast<const FloatPair*>(lse_s + local0);
      const FloatPair pair_delta = *reinterpret_cast<const FloatPair*>(delta_s + local0);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = e & 1;
        PairGradient pg = pair_gradient(st[nt][e], dpt[nt][e], c ? pair_lse.y : pair_lse.x,
                                        c ? pair_delta.y : pair_delta.x, f[c][e >> 1], scale2);
        if (edge &&
            !(i0 + local0 + c < g.s && key_local + 8 * (e >> 1) <= diagonal_offset + local0 + c)) {
          pg = {0.0f, 0.0f};
        }
        st[nt][e] = pg.p;
        dpt[nt][e] = pg.ds;
      }
    }
    if constexpr (kStoreDs) {
#pragma unroll
      for (int nt = 0; nt < kQueries / 8; ++nt) {
        const std::int64_t query = i0 + 8 * nt + accumulator_col(0);  // even, as ds_ld
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const std::int64_t key = key_base + 8 * h;
          if (key < g.s && query < g.s) {
            *reinterpret_cast<std::uint32_t*>(ds + (bh * g.s + key) * ds_ld + query) =
                mma::pack2<T>(dpt[nt][2 * h], dpt[nt][2 * h + 1]);
          }
        }
      }
    }
    warp_product_pb<T, kHn, kQueries>(dv, st, do_s);
    warp_product_pb<T, kHn, kQueries>(dk, dpt, q_s);
    __syncthreads();  // this stage and the statistics are rewritten by the next iterations
  }

  // dqkv += … (or =): α applied at the end, as the CPU's GEMM.
  write_gradient_rows<T, kHn>(dqkv, kHn, dk, key_base, bh, g, alpha * coeff, accumulate);
  write_gradient_rows<T, kHn>(dqkv, 2 * kHn, dv, key_base, bh, g, 1.0f, accumulate);
}

// dq of 64 query rows: block (slice, query tile) walks the key tiles up to its diagonal; warp w
// owns rows 16w … 16w + 15: S = q·kᵀ, dP = dO·vᵀ, dq += dS·k. Stores its rows' delta
// (delta[bh·s + row]) for dkdv_kernel.
template <typename T, int kHn>
__global__ void __launch_bounds__(kThreads, kBackwardMinBlocks)
    dq_kernel(std::uint16_t* dqkv, float* delta, const std::uint16_t* dctx,
              const std::uint16_t* ctx, const float* lse, const std::uint16_t* qkv, Geometry g,
              float alpha, float coeff, bool accumulate) {
  static_assert(kHn == 64 || kHn == 128, "head dims 64 and 128");
  constexpr int kKeys = kBackwardStep<kHn>;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* q_s = reinterpret_cast<std::uint16_t*>(smem);
  std::uint16_t* do_s = q_s + kTileElems<kHn, kBlockRows>;
  std::uint16_t* kv_s = do_s + kTileElems<kHn, kBlockRows>;  // stage: k tile, then v tile
  auto* lse_s = reinterpret_cast<float*>(kv_s + 4 * kTileElems<kHn, kKeys>);
  float* delta_s = lse_s + kBlockRows;

  const std::int64_t bh = blockIdx.x;
  const std::int64_t i0 = static_cast<std::int64_t>(gridDim.y - 1 - blockIdx.y) * kBlockRows;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const std::uint16_t* q = qkv + bh * 3 * kHn;
  const std::uint16_t* k = q + kHn;
  const std::uint16_t* v = q + 2 * kHn;
  load_tile_async<kHn, kBlockRows>(q_s, q, g.qkv_ld, i0, g.s);
  load_tile_async<kHn, kBlockRows>(do_s, dctx + bh * kHn, g.ctx_ld, i0, g.s);
  load_tile_async<kHn, kKeys>(kv_s, k, g.qkv_ld, 0, g.s);
  load_tile_async<kHn, kKeys>(kv_s + kTileElems<kHn, kKeys>, v, g.qkv_ld, 0, g.s);
  mma::cp_async_commit();

  const int local_base = kWarpRows * warp + accumulator_row(0);
  const std::int64_t row_base = i0 + local_base;
  const float scale2 = alpha * coeff * kLog2e;
  const float bias_scale = 1.0f / (alpha * coeff);
  float dq[kHn / 8][4] = {};
  float row_lse[2] = {0.0f, 0.0f}, row_delta[2] = {0.0f, 0.0f};
  const bool stored_bits = g.dropout.p > 0.0f && g.dropout.keep_bits != nullptr;
  const std::int64_t last_row = (i0 + kBlockRows < g.s ? i0 + kBlockRows : g.s) - 1;
  const int tiles = static_cast<int>(last_row / kKeys) + 1;
  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) {
      std::uint16_t* next = kv_s + ((j + 1) & 1) * 2 * kTileElems<kHn, kKeys>;
      load_tile_async<kHn, kKeys>(next, k, g.qkv_ld, (j + 1) * kKeys, g.s);
      load_tile_async<kHn, kKeys>(next + kTileElems<kHn, kKeys>, v, g.qkv_ld, (j + 1) * kKeys, g.s);
      mma::cp_async_commit();
      mma::cp_async_wait<1>();
    } else {
      mma::cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {  // q and dO have landed with the first k, v
      row_statistics<T, kHn, kBlockRows>(lse_s, delta_s, do_s, ctx, lse, bh, i0, g);
      __syncthreads();
      const int tid = static_cast<int>(threadIdx.x);
      if (tid < kBlockRows && i0 + tid < g.s) delta[bh * g.s + i0 + tid] = delta_s[tid];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_lse[h] = lse_s[local_base + 8 * h];
        row_delta[h] = delta_s[local_base + 8 * h];
      }
    }
    const std::uint16_t* k_s = kv_s + (j & 1) * 2 * kTileElems<kHn, kKeys>;
    const std::uint16_t* v_s = k_s + kTileElems<kHn, kKeys>;
    const std::int64_t j0 = static_cast<std::int64_t>(j) * kKeys;

    // The forward's keep bits of this thread's rows, loaded ahead of the products.
    std::uint32_t kept[2][kKeys / 32] = {};
    if (stored_bits) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int w = 0; w < kKeys / 32; ++w) {
          kept[h][w] = load_keep_word(g, bh, row_base + 8 * h, j0 + 32 * w);
        }
      }
    }
    float sc[kKeys / 8][4] = {}, dp[kKeys / 8][4] = {};
    warp_product_abt<T, kHn, kKeys>(sc, q_s, kWarpRows * warp, k_s);
    warp_product_abt<T, kHn, kKeys>(dp, do_s, kWarpRows * warp, v_s);
    add_key_bias_by_column<kKeys>(sc, g, bh, j0, bias_scale);
    // Pairs to zero: keys after their row (the tiles reaching past the block's first row) and
    // rows past the end (every tile of the last block); none elsewhere (warp-uniform).
    const bool edge = j0 + kKeys > i0 || i0 + kBlockRows > g.s;
    const int key_offset = static_cast<int>(j0 - i0);  // key ≤ row: this + key − j0 ≤ local row
#pragma unroll
    for (int np = 0; np < kKeys / 16; ++np) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::int64_t row = row_base + 8 * h;
        float f[2][2] = {{1.0f, 1.0f}, {1.0f, 1.0f}};
        if (stored_bits) {
          row_factors_from_bits(f, g.dropout, kept[h][np / 2], 16 * np);
        } else if (g.dropout.p > 0.0f) {
          row_dropout(f, g, bh, row, j0 + 16 * np);
        }
#pragma unroll
        for (int tile = 0; tile < 2; ++tile) {
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int nt = 2 * np + tile;
            float ds = pair_gradient(sc[nt][2 * h + c], dp[nt][2 * h + c], row_lse[h], row_delta[h],
                                     f[tile][c], scale2)
                           .ds;
            if (edge &&
                !(row < g.s && key_offset + 8 * nt + accumulator_col(c) <= local_base + 8 * h)) {
              ds = 0.0f;
            }
            dp[nt][2 * h + c] = ds;
          }
        }
      }
    }
    warp_product_pb<T, kHn, kKeys>(dq, dp, k_s);
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }
  write_gradient_rows<T, kHn>(dqkv, 0, dq, row_base, bh, g, alpha * coeff, accumulate);
}

// ---- dq from the stored dSᵀ --------------------------------------------------------------------
// Where memory allows, the backward runs row_delta_kernel, then dkdv_kernel<…, true>, which stores
// dSᵀ, then dq_from_ds_kernel: dq = dS·k from those values instead of dq_kernel computing S, dP and
// dS again (two of its three products, and its exps and dropout). dS is rounded to T for its
// product in both, and the products come in the same order, so dq has dq_kernel's bits wherever
// the two kernels compute the same dS.

// Dynamic shared memory of row_delta_kernel (a dO tile, then lse and delta of its rows) and of
// dq_from_ds_kernel (two stages of a 64-key dSᵀ tile of the block's query rows and a k tile).
template <int kHn>
constexpr int kRowDeltaSharedBytes = 2 * kTileElems<kHn, kBlockRows> + 2 * 4 * kBlockRows;
template <int kHn, int kAtoms = 1>
constexpr int kDqFromDsSharedBytes = 2 * 2 *
                                     (kTileElems<kAtomBlockRows<kAtoms>, kBlockRows> +
                                      kTileElems<kHn, kBlockRows>);

// Blocks an SM for dq_from_ds_kernel's registers: with one atom a warp ptxas takes 116 (four
// blocks fit); with two it would take 188 (two blocks), and at three blocks' 168 it spills nothing.
template <int kAtoms>
constexpr int kDqFromDsMinBlocks = kAtoms == 2 ? 3 : kBackwardMinBlocks;

// Rows of the stored dSᵀ: s rounded up to whole blocks of 128 query rows, so that every tile
// dq_from_ds_kernel loads lies inside the buffer (columns past s hold whatever was there; they
// only reach dq's rows past the end, which are not written).
inline std::int64_t stored_ds_ld(std::int64_t s) {
  constexpr std::int64_t kWidest = kAtomBlockRows<2>;
  return (s + kWidest - 1) / kWidest * kWidest;
}

// delta[bh·s + row] = dctx_row · ctx_row for the 64 rows of block (slice, tile), as dq_kernel
// stores them (row_statistics).
template <typename T, int kHn>
__global__ void __launch_bounds__(kThreads)
    row_delta_kernel(float* delta, const std::uint16_t* dctx, const std::uint16_t* ctx,
                     const float* lse, Geometry g) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* do_s = reinterpret_cast<std::uint16_t*>(smem);
  auto* lse_s = reinterpret_cast<float*>(do_s + kTileElems<kHn, kBlockRows>);
  float* delta_s = lse_s + kBlockRows;
  const std::int64_t bh = blockIdx.x;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.y) * kBlockRows;
  load_tile_async<kHn, kBlockRows>(do_s, dctx + bh * kHn, g.ctx_ld, i0, g.s);
  mma::cp_async_commit();
  mma::cp_async_wait<0>();
  __syncthreads();
  row_statistics<T, kHn, kBlockRows>(lse_s, delta_s, do_s, ctx, lse, bh, i0, g);
  __syncthreads();
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kBlockRows && i0 + tid < g.s) delta[bh * g.s + i0 + tid] = delta_s[tid];
}

// dq of 64·kAtoms query rows: block (slice, query tile) walks the key tiles up to its diagonal,
// loading each 64-key tile of the stored dSᵀ (ds, rows of ds_ld: stored_ds_ld) over its rows and
// the k tile, double-buffered; a warp's A fragments of dS (its 16 rows of each atom) come from the
// dSᵀ tile by ldmatrix.trans.
template <typename T, int kHn, int kAtoms = 1>
__global__ void __launch_bounds__(kThreads, (kDqFromDsMinBlocks<kAtoms>))
    dq_from_ds_kernel(std::uint16_t* dqkv, const std::uint16_t* ds, std::int64_t ds_ld,
                      const std::uint16_t* qkv, Geometry g, float alpha, float coeff,
                      bool accumulate) {
  static_assert(kHn == 64 || kHn == 128, "head dims 64 and 128");
  static_assert(kAtoms == 1 || (kAtoms == 2 && kHn == 64), "two atoms a warp at hn = 64 only");
  constexpr int kKeys = kBlockRows;
  constexpr int kRows = kAtomBlockRows<kAtoms>;
  constexpr int kStage = kTileElems<kRows, kKeys> + kTileElems<kHn, kKeys>;  // dSᵀ, then k
  extern __shared__ __align__(16) unsigned char smem[];
  auto* stages = reinterpret_cast<std::uint16_t*>(smem);

  const std::int64_t bh = blockIdx.x;
  const std::int64_t i0 = static_cast<std::int64_t>(gridDim.y - 1 - blockIdx.y) * kRows;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const std::uint16_t* k = qkv + bh * 3 * kHn + kHn;
  const std::uint16_t* ds_rows = ds + bh * g.s * ds_ld + i0;  // row: a key; columns: i0 + query
  const auto load_stage = [&](int j) {
    std::uint16_t* stage = stages + (j & 1) * kStage;
    load_tile_async<kRows, kKeys>(stage, ds_rows, ds_ld, static_cast<std::int64_t>(j) * kKeys, g.s);
    load_tile_async<kHn, kKeys>(stage + kTileElems<kRows, kKeys>, k, g.qkv_ld,
                                static_cast<std::int64_t>(j) * kKeys, g.s);
    mma::cp_async_commit();
  };
  load_stage(0);
  float dq[kAtoms][kHn / 8][4] = {};
  const std::int64_t last_row = (i0 + kRows < g.s ? i0 + kRows : g.s) - 1;
  const int tiles = static_cast<int>(last_row / kKeys) + 1;
  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) {
      load_stage(j + 1);
      mma::cp_async_wait<1>();
    } else {
      mma::cp_async_wait<0>();
    }
    __syncthreads();
    const std::uint16_t* ds_s = stages + (j & 1) * kStage;
    const std::uint16_t* k_s = ds_s + kTileElems<kRows, kKeys>;
    // Atom a's A fragment of k-chunk kc: its rows' dS over the chunk's 16 keys.
    const auto ds_chunk = [&](int a, int kc, std::uint32_t(&frag)[4]) {
      load_a_transposed<kRows>(frag, ds_s, kBlockRows * a + kWarpRows * warp, 16 * kc);
    };
    // With two atoms the block's last tile lies past the first atom's diagonal, where dkdv_kernel
    // stored nothing: the second alone takes it (warp-uniform).
    if (kAtoms == 2 && static_cast<std::int64_t>(j) * kKeys > i0) {
      warp_product_ab<T, kHn, kKeys>(
          dq[kAtoms - 1], [&](int kc, std::uint32_t(&frag)[4]) { ds_chunk(kAtoms - 1, kc, frag); },
          k_s);
    } else {
      warp_product_ab_atoms<T, kHn, kKeys, kAtoms>(
          [&](int a) -> float(&)[kHn / 8][4] { return dq[a]; }, ds_chunk, k_s);
    }
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }
#pragma unroll
  for (int a = 0; a < kAtoms; ++a) {
    write_gradient_rows<T, kHn>(dqkv, 0, dq[a],
                                i0 + kBlockRows * a + kWarpRows * warp + accumulator_row(0), bh, g,
                                alpha * coeff, accumulate);
  }
}

}  // namespace mds::kernels::attention_tc_detail
