// Device code of kernels/attention.cu (launched from there): kept in a header of plain CUDA with
// no runtime includes, so that tests/unit/kernels_emulated_attention_test.cpp can also compile it
// for the CPU under a SIMT emulation (tests/unit/simt_emulation.h) and run it in CI.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/attention_io.cuh"
#include "kernels/philox.cuh"

namespace mds::kernels::attention_detail {

// Every kernel here: a block of 256 threads (8 warps) works on tiles of 32 query rows against
// tiles of 32 keys, all of one (batch, head) slice. Rows of a tile sit in shared memory with a
// stride of hn + 1 floats: odd, so a warp whose lanes read the same column of 32 different rows
// touches 32 different banks.
//
// Two thread layouts, used in turn:
//  - pairs: warp w takes query rows w, w + 8, w + 16, w + 24 of the tile, lane l takes key l:
//    the scores of a row are spread over one warp, so softmax max and sum are warp reductions;
//  - outputs: thread t owns tile row t / 8 and the columns t % 8 + 8·c (c < hn / 8) of an
//    accumulator held in registers.
constexpr int kTile = 32;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = kTile / kWarps;  // 4
constexpr int kColGroups = kThreads / kTile;  // 8 threads share an output row
constexpr int kPairLd = kTile + 1;            // stride of the [32][32] probability tiles

static_assert(kTile == 32, "lanes index keys: a key tile is one warp wide");

// Attention dropout (p > 0): the masks of ops/cpu/attention.cpp's causal_dropout_slice. Pair
// (row i, key j) of slice bh = batch·np + head is element (sh·s + i)·s + j of the Philox stream
// (seed, offset), sh = batch·stream_heads + first_head + head numbering the slice among all the
// layer's heads; kept with factor `scale` = 1/(1 − p) (rounded on the host as the CPU's).
struct Dropout {
  float p = 0.0f;
  float scale = 1.0f;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
  std::int64_t np = 1;  // heads of this tensor
  std::int64_t first_head = 0;
  std::int64_t stream_heads = 1;
  // The keep bits (kernels/attention.h): bit j % 32 of word (bh·s + i)·keep_words(s) + j / 32 is
  // set where pair (i, j) is kept. Null: each kernel draws the factors it needs. Otherwise the
  // forwards write them and the tensor-core backward reads them instead of drawing.
  std::uint32_t* keep_bits = nullptr;
};

// Words of keep bits per query row: the keys rounded up to tiles of 64.
__host__ __device__ constexpr std::int64_t keep_words(std::int64_t s) {
  return 2 * ((s + 63) / 64);
}

// The keep word of (row, key / 32) of slice bh.
__device__ inline std::int64_t keep_word_index(std::int64_t s, std::int64_t bh, std::int64_t row,
                                               std::int64_t key) {
  return (bh * s + row) * keep_words(s) + key / 32;
}

// Strides of one slice's views, and the dropout.
struct Geometry {
  std::int64_t s;
  std::int64_t qkv_ld;  // elements from one token to the next in qkv: b·np·3·hn
  std::int64_t ctx_ld;  // in ctx: b·np·hn
  Dropout dropout = {};
  // ALiBi (null: none): fp32 [dropout.np, s], key j of head h adds key_bias[h·s + j]/coeff to
  // the score, as ops::attention_probs_forward's key_bias (attention_tc_kernels.cuh: the same
  // in score units).
  const float* key_bias = nullptr;
};

template <int kHn>
constexpr int kRowLd = kHn + 1;

// The storage of the activations q, k, v, ctx, dctx and dqkv: attention_io.cuh's policies.
using attention_io::Fp32Io;

__device__ inline float warp_sum(float value) {
  // A butterfly: every lane ends with the same bits (each step adds the same two values).
  for (int delta = 16; delta > 0; delta /= 2) value += __shfl_xor_sync(0xFFFFFFFFu, value, delta);
  return value;
}

__device__ inline float warp_max(float value) {
  for (int delta = 16; delta > 0; delta /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, delta));
  return value;
}

// Copies rows [first, first + kTile) of a strided [s, kHn] view into a shared tile; rows past
// the end become zeros, so that a zero probability times them stays zero (not 0·NaN).
template <int kHn, typename Io>
__device__ void load_tile(float* tile, const typename Io::Elem* src, std::int64_t ld,
                          std::int64_t first, std::int64_t s) {
  for (int e = threadIdx.x; e < kTile * kHn; e += kThreads) {
    const int r = e / kHn, d = e % kHn;
    const std::int64_t row = first + r;
    tile[r * kRowLd<kHn> + d] = row < s ? Io::load(src, row * ld + d) : 0.0f;
  }
}

// a·b over kHn floats in four interleaved partial sums (a fixed order; the partials give the
// loop some independent work).
template <int kHn>
__device__ float dot(const float* a, const float* b) {
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int d = 0; d < kHn; ++d) part[d % 4] += a[d] * b[d];
  return (part[0] + part[1]) + (part[2] + part[3]);
}

// z = coeff·S for one (query, key ≤ row) pair of slice bh, S = α·q·k as the CPU's GEMM with alpha
// gives it, plus ALiBi's key bias over coeff as the CPU adds it.
template <int kHn>
__device__ float scaled_score(const float* q, const float* k, float alpha, float coeff,
                              const Geometry& g, std::int64_t bh, std::int64_t key) {
  const float score = alpha * dot<kHn>(q, k);
  if (g.key_bias == nullptr) return score * coeff;
  const float bias = g.key_bias[(bh % g.dropout.np) * g.s + key];
  return ((1.0f / coeff) * bias + score) * coeff;
}

// The dropout factor of pair (row, key ≤ row) of slice bh: scale if kept, 0 if dropped, as
// ops::attention_dropout_keep decides for element (sh·s + row)·s + key. Only called with p > 0.
// One Philox block per pair (the CPU draws one per eight consecutive keys and gets the same
// bits).
__device__ inline float dropout_factor(const Geometry& g, std::int64_t bh, std::int64_t row,
                                       std::int64_t key) {
  const Dropout& d = g.dropout;
  const std::int64_t sh = (bh / d.np) * d.stream_heads + d.first_head + bh % d.np;
  const auto index = static_cast<std::uint64_t>((sh * g.s + row) * g.s + key);
  const detail::PhiloxWords words = detail::philox_block(d.seed, d.offset, index / 8);
  return detail::philox_half(words, index) >= detail::keep_threshold16(d.p) ? d.scale : 0.0f;
}

// Base pointers of slice bh (= batch·np + head): q at +0, k at +hn, v at +2·hn in qkv.
template <int kHn>
__device__ std::int64_t qkv_offset(std::int64_t bh) {
  return bh * 3 * kHn;
}

// ---- forward --------------------------------------------------------------------------------

template <int kHn, typename Io = Fp32Io>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(typename Io::Elem* ctx, float* lse, const typename Io::Elem* qkv, Geometry g,
                   float alpha, float coeff) {
  extern __shared__ float smem[];
  constexpr int kLd = kRowLd<kHn>;
  float* q_s = smem;
  float* k_s = q_s + kTile * kLd;
  float* v_s = k_s + kTile * kLd;
  float* p_s = v_s + kTile * kLd;            // [kTile][kPairLd] probabilities of the key tile
  float* rescale_s = p_s + kTile * kPairLd;  // [kTile] exp(m_old − m_new) of each row
  float* sum_s = rescale_s + kTile;          // [kTile] final Σ exp(z − m)

  const std::int64_t bh = blockIdx.x;
  // The last query tiles see the most keys: start them first.
  const std::int64_t i0 = static_cast<std::int64_t>(gridDim.y - 1 - blockIdx.y) * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const typename Io::Elem* q = qkv + qkv_offset<kHn>(bh);
  load_tile<kHn, Io>(q_s, q, g.qkv_ld, i0, g.s);

  // Pair layout state: running max and sum of the warp's rows (equal in every lane).
  float m[kRowsPerWarp], l[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  // Output layout state.
  const int out_row = threadIdx.x / kColGroups, out_col = threadIdx.x % kColGroups;
  float acc[kHn / kColGroups];
  for (float& a : acc) a = 0.0f;

  const std::int64_t last_row = (i0 + kTile < g.s ? i0 + kTile : g.s) - 1;
  for (std::int64_t j0 = 0; j0 <= last_row; j0 += kTile) {
    __syncthreads();  // the previous tile's k_s, v_s and p_s are no longer read
    load_tile<kHn, Io>(k_s, q + kHn, g.qkv_ld, j0, g.s);
    load_tile<kHn, Io>(v_s, q + 2 * kHn, g.qkv_ld, j0, g.s);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int i = warp + kWarps * r;
      const std::int64_t row = i0 + i, key = j0 + lane;
      if (row >= g.s) {  // the whole warp: nothing to add for a row past the end
        p_s[i * kPairLd + lane] = 0.0f;
        if (lane == 0) rescale_s[i] = 1.0f;
        continue;
      }
      // j0 ≤ i0 ≤ row: key j0 is never masked, so the tile max is finite.
      const float z =
          key <= row ? scaled_score<kHn>(q_s + i * kLd, k_s + lane * kLd, alpha, coeff, g, bh, key)
                     : -INFINITY;
      const float m_new = fmaxf(m[r], warp_max(z));
      const float p = expf(z - m_new);           // masked: exp(−inf) = 0
      const float rescale = expf(m[r] - m_new);  // first tile: exp(−inf) = 0
      l[r] = l[r] * rescale + warp_sum(p);
      m[r] = m_new;
      // The normalizer sums the kept and the dropped probabilities (dropout follows the softmax);
      // only the context product sees the mask.
      const bool drop = g.dropout.p > 0.0f && key <= row;
      p_s[i * kPairLd + lane] = drop ? p * dropout_factor(g, bh, row, key) : p;
      if (lane == 0) rescale_s[i] = rescale;
    }
    __syncthreads();
    const float rescale = rescale_s[out_row];
    for (float& a : acc) a *= rescale;
    for (int j = 0; j < kTile; ++j) {
      const float p = p_s[out_row * kPairLd + j];
#pragma unroll
      for (int c = 0; c < kHn / kColGroups; ++c)
        acc[c] += p * v_s[j * kLd + out_col + kColGroups * c];
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int i = warp + kWarps * r;
    const std::int64_t row = i0 + i;
    if (lane == 0 && row < g.s) {
      sum_s[i] = l[r];
      lse[bh * g.s + row] = m[r] + logf(l[r]);
    }
  }
  __syncthreads();
  const std::int64_t row = i0 + out_row;
  if (row >= g.s) return;
  const float sum = sum_s[out_row];
  typename Io::Elem* out = ctx + row * g.ctx_ld + bh * kHn;
#pragma unroll
  for (int c = 0; c < kHn / kColGroups; ++c) Io::store(out, out_col + kColGroups * c, acc[c] / sum);
}

// ---- backward -------------------------------------------------------------------------------

// Pair layout, for the query tile at i0 and key tile at j0 (both in shared memory): the
// probability p = exp(z − lse) and the score gradient g = coeff·p·(dp − delta) of each pair, with
// dp = dctx·v; zeros for masked pairs and rows past the end. As the CPU's softmax backward
// dS = coeff·p ⊙ (dp − Σ p·dp), where delta = dctx·ctx = Σ_j p_j·dp_j.
// With dropout, dp is the gradient of the dropped probability, so the softmax sees dp·factor (the
// CPU's dropout backward on dprobs), and dv needs the dropped probability p·factor; delta =
// dctx·ctx is still Σ_j p_j·(dp_j·factor_j), ctx being the dropped probabilities times v.
template <int kHn>
__device__ void pair_gradients(float* p_s, float* g_s, const float* q_s, const float* k_s,
                               const float* v_s, const float* do_s, const float* row_lse,
                               const float* row_delta, std::int64_t bh, std::int64_t i0,
                               std::int64_t j0, const Geometry& g, float alpha, float coeff) {
  constexpr int kLd = kRowLd<kHn>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int i = warp + kWarps * r;
    const std::int64_t row = i0 + i, key = j0 + lane;
    float p = 0.0f, grad = 0.0f;
    if (row < g.s && key <= row) {
      const float z = scaled_score<kHn>(q_s + i * kLd, k_s + lane * kLd, alpha, coeff, g, bh, key);
      p = expf(z - row_lse[r]);
      float dp = dot<kHn>(do_s + i * kLd, v_s + lane * kLd);
      if (g.dropout.p > 0.0f) {
        const float factor = dropout_factor(g, bh, row, key);
        dp = dp * factor;
        grad = coeff * (p * (dp - row_delta[r]));
        p = p * factor;
      } else {
        grad = coeff * (p * (dp - row_delta[r]));
      }
    }
    if (p_s != nullptr) p_s[i * kPairLd + lane] = p;
    g_s[i * kPairLd + lane] = grad;
  }
}

// The pair layout's per-row lse and delta = dctx·ctx for the query tile at i0 (do_s loaded).
template <int kHn, typename Io>
__device__ void row_statistics(float* row_lse, float* row_delta, const float* do_s,
                               const typename Io::Elem* ctx, const float* lse, std::int64_t bh,
                               std::int64_t i0, const Geometry& g) {
  constexpr int kLd = kRowLd<kHn>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int i = warp + kWarps * r;
    const std::int64_t row = i0 + i;
    row_lse[r] = 0.0f;
    row_delta[r] = 0.0f;
    if (row >= g.s) continue;  // the whole warp
    const typename Io::Elem* o = ctx + row * g.ctx_ld + bh * kHn;
    float partial = 0.0f;
    for (int d = lane; d < kHn; d += 32) partial += do_s[i * kLd + d] * Io::load(o, d);
    row_delta[r] = warp_sum(partial);
    row_lse[r] = lse[bh * g.s + row];
  }
}

// dk and dv of one key tile: block (bh, key tile) walks the query tiles from its own diagonal
// to the end; thread t owns key row t / 8 of both accumulators.
template <int kHn, typename Io = Fp32Io>
__global__ void __launch_bounds__(kThreads)
    dkdv_kernel(typename Io::Elem* dqkv, const typename Io::Elem* dctx,
                const typename Io::Elem* ctx, const float* lse, const typename Io::Elem* qkv,
                Geometry g, float alpha, float coeff) {
  extern __shared__ float smem[];
  constexpr int kLd = kRowLd<kHn>;
  float* k_s = smem;
  float* v_s = k_s + kTile * kLd;
  float* q_s = v_s + kTile * kLd;
  float* do_s = q_s + kTile * kLd;
  float* p_s = do_s + kTile * kLd;
  float* g_s = p_s + kTile * kPairLd;

  const std::int64_t bh = blockIdx.x;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const typename Io::Elem* q = qkv + qkv_offset<kHn>(bh);
  const typename Io::Elem* dout = dctx + bh * kHn;
  load_tile<kHn, Io>(k_s, q + kHn, g.qkv_ld, j0, g.s);
  load_tile<kHn, Io>(v_s, q + 2 * kHn, g.qkv_ld, j0, g.s);

  const int own_row = threadIdx.x / kColGroups, own_col = threadIdx.x % kColGroups;
  float dk[kHn / kColGroups], dv[kHn / kColGroups];
  for (int c = 0; c < kHn / kColGroups; ++c) dk[c] = dv[c] = 0.0f;
  float row_lse[kRowsPerWarp], row_delta[kRowsPerWarp];

  for (std::int64_t i0 = j0; i0 < g.s; i0 += kTile) {
    __syncthreads();  // q_s, do_s, p_s, g_s of the previous query tile are no longer read
    load_tile<kHn, Io>(q_s, q, g.qkv_ld, i0, g.s);
    load_tile<kHn, Io>(do_s, dout, g.ctx_ld, i0, g.s);
    __syncthreads();
    row_statistics<kHn, Io>(row_lse, row_delta, do_s, ctx, lse, bh, i0, g);
    pair_gradients<kHn>(p_s, g_s, q_s, k_s, v_s, do_s, row_lse, row_delta, bh, i0, j0, g, alpha,
                        coeff);
    __syncthreads();
    // dv_j += Σ_i p_ij·dctx_i (p dropped), dk_j += Σ_i g_ij·q_i (α applied at the end, as the
    // CPU's GEMM).
    for (int i = 0; i < kTile; ++i) {
      const float p = p_s[i * kPairLd + own_row], grad = g_s[i * kPairLd + own_row];
#pragma unroll
      for (int c = 0; c < kHn / kColGroups; ++c) {
        const int d = own_col + kColGroups * c;
        dv[c] += p * do_s[i * kLd + d];
        dk[c] += grad * q_s[i * kLd + d];
      }
    }
  }
  const std::int64_t key = j0 + own_row;
  if (key >= g.s) return;
  // dqkv += …: the stored value widened, the sum in fp32, rounded once.
  typename Io::Elem* out = dqkv + key * g.qkv_ld + qkv_offset<kHn>(bh);
#pragma unroll
  for (int c = 0; c < kHn / kColGroups; ++c) {
    const int d = own_col + kColGroups * c;
    Io::store(out, kHn + d, Io::load(out, kHn + d) + alpha * dk[c]);
    Io::store(out, 2 * kHn + d, Io::load(out, 2 * kHn + d) + dv[c]);
  }
}

// dq of one query tile: block (bh, query tile) walks the key tiles up to its diagonal; thread t
// owns query row t / 8 of the accumulator.
template <int kHn, typename Io = Fp32Io>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(typename Io::Elem* dqkv, const typename Io::Elem* dctx, const typename Io::Elem* ctx,
              const float* lse, const typename Io::Elem* qkv, Geometry g, float alpha,
              float coeff) {
  extern __shared__ float smem[];
  constexpr int kLd = kRowLd<kHn>;
  float* q_s = smem;
  float* do_s = q_s + kTile * kLd;
  float* k_s = do_s + kTile * kLd;
  float* v_s = k_s + kTile * kLd;
  float* g_s = v_s + kTile * kLd;

  const std::int64_t bh = blockIdx.x;
  const std::int64_t i0 = static_cast<std::int64_t>(gridDim.y - 1 - blockIdx.y) * kTile;
  const typename Io::Elem* q = qkv + qkv_offset<kHn>(bh);
  load_tile<kHn, Io>(q_s, q, g.qkv_ld, i0, g.s);
  load_tile<kHn, Io>(do_s, dctx + bh * kHn, g.ctx_ld, i0, g.s);
  __syncthreads();
  float row_lse[kRowsPerWarp], row_delta[kRowsPerWarp];
  row_statistics<kHn, Io>(row_lse, row_delta, do_s, ctx, lse, bh, i0, g);

  const int own_row = threadIdx.x / kColGroups, own_col = threadIdx.x % kColGroups;
  float dq[kHn / kColGroups];
  for (float& a : dq) a = 0.0f;
  const std::int64_t last_row = (i0 + kTile < g.s ? i0 + kTile : g.s) - 1;
  for (std::int64_t j0 = 0; j0 <= last_row; j0 += kTile) {
    __syncthreads();  // k_s, v_s, g_s of the previous key tile are no longer read
    load_tile<kHn, Io>(k_s, q + kHn, g.qkv_ld, j0, g.s);
    load_tile<kHn, Io>(v_s, q + 2 * kHn, g.qkv_ld, j0, g.s);
    __syncthreads();
    pair_gradients<kHn>(nullptr, g_s, q_s, k_s, v_s, do_s, row_lse, row_delta, bh, i0, j0, g, alpha,
                        coeff);
    __syncthreads();
    // dq_i += Σ_j g_ij·k_j (α at the end).
    for (int j = 0; j < kTile; ++j) {
      const float grad = g_s[own_row * kPairLd + j];
#pragma unroll
      for (int c = 0; c < kHn / kColGroups; ++c) {
        dq[c] += grad * k_s[j * kLd + own_col + kColGroups * c];
      }
    }
  }
  const std::int64_t row = i0 + own_row;
  if (row >= g.s) return;
  typename Io::Elem* out = dqkv + row * g.qkv_ld + qkv_offset<kHn>(bh);
#pragma unroll
  for (int c = 0; c < kHn / kColGroups; ++c) {
    const int d = own_col + kColGroups * c;
    Io::store(out, d, Io::load(out, d) + alpha * dq[c]);
  }
}

}  // namespace mds::kernels::attention_detail
