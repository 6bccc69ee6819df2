#include "ops/cpu/attention.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "ops/cpu/dropout.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/vector_math.h"

namespace mds::ops::cpu {

namespace {

// α = 1/norm_factor as upstream computes it: in double (Python floats), handed to the fp32 GEMM.
float score_alpha(const AttentionDims& d, float coeff) {
  return static_cast<float>(1.0 / (std::sqrt(static_cast<double>(d.hn)) * coeff));
}

// Offsets of one (batch, head) slice. q, k and v are strided views into qkv whose rows (tokens)
// are b·np·3·hn floats apart; ctx rows are b·np·hn apart.
struct Slice {
  std::int64_t qkv;  // offset of q; k is +hn, v is +2·hn
  std::int64_t ctx;
  std::int64_t probs;
};

Slice slice(const AttentionDims& d, std::int64_t bh) {
  const std::int64_t batch = bh / d.np, head = bh % d.np;
  return {(batch * d.np + head) * 3 * d.hn, (batch * d.np + head) * d.hn, bh * d.s * d.s};
}

std::int64_t qkv_ld(const AttentionDims& d) {
  return d.b * d.np * 3 * d.hn;
}
std::int64_t ctx_ld(const AttentionDims& d) {
  return d.b * d.np * d.hn;
}

// Softmax in fp32 over key positions 0..i of score row i (the causal mask); masked entries become
// exact zeros, as exp(finfo.min − max) and the fused kernel's −inf both do. The max and the sum
// run in kLanes independent lanes combined in a fixed order, so that the loops vectorize and the
// result does not depend on the thread count.
constexpr std::int64_t kLanes = 8;

MDS_VECTOR_CLONES void causal_softmax_row(float* p, std::int64_t i, std::int64_t s, float coeff) {
  const std::int64_t n = i + 1, vector_end = n - n % kLanes;
  std::array<float, kLanes> lane_max;
  lane_max.fill(-INFINITY);
  for (std::int64_t j = 0; j < vector_end; j += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l) {
      const float z = p[j + l] * coeff;
      p[j + l] = z;
      float& m = lane_max[static_cast<std::size_t>(l)];
      m = z > m ? z : m;
    }
  }
  float max = -INFINITY;
  for (const float m : lane_max) max = m > max ? m : max;
  for (std::int64_t j = vector_end; j < n; ++j) {
    p[j] *= coeff;
    max = p[j] > max ? p[j] : max;
  }
  std::array<float, kLanes> lane_sum{};
  for (std::int64_t j = 0; j < vector_end; j += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l) {
      const float e = vector_exp(p[j + l] - max);
      p[j + l] = e;
      lane_sum[static_cast<std::size_t>(l)] += e;
    }
  }
  float sum = 0.0f;
  for (std::int64_t j = vector_end; j < n; ++j) {
    p[j] = vector_exp(p[j] - max);
    sum += p[j];
  }
  for (const float partial : lane_sum) sum += partial;
  const float inv = 1.0f / sum;
  for (std::int64_t j = 0; j < n; ++j) p[j] *= inv;
  for (std::int64_t j = n; j < s; ++j) p[j] = 0.0f;
}

// Softmax backward of z = coeff·S for one row: dS = coeff · p ⊙ (dp − Σ_j p_j·dp_j), zero where
// masked.
MDS_VECTOR_CLONES void causal_softmax_backward_row(float* g, const float* p, std::int64_t i,
                                                   std::int64_t s, float coeff) {
  const std::int64_t n = i + 1, vector_end = n - n % kLanes;
  std::array<float, kLanes> lane_dot{};
  for (std::int64_t j = 0; j < vector_end; j += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l)
      lane_dot[static_cast<std::size_t>(l)] += p[j + l] * g[j + l];
  }
  float dot = 0.0f;
  for (std::int64_t j = vector_end; j < n; ++j) dot += p[j] * g[j];
  for (const float partial : lane_dot) dot += partial;
  for (std::int64_t j = 0; j < n; ++j) g[j] = coeff * (p[j] * (g[j] - dot));
  for (std::int64_t j = i + 1; j < s; ++j) g[j] = 0.0f;
}

// Attention dropout of one (batch, head) slice, masks drawn on and below the diagonal only (above
// it the probabilities are exact zeros, and so are the results): dropped = probs ⊙ mask·scale and,
// when dprobs is not null, dprobs ⊙= mask·scale with the same draw. Element (i, j) of slice bh is
// element sh·s² + i·s + j of the stream, sh the slice's index among all the layer's heads (the
// tensor's own bh without a head split), drawn as ops::attention_dropout_keep draws it.
void causal_dropout_slice(float* dropped, float* dprobs, const float* probs, std::int64_t bh,
                          const AttentionDims& d, const DropoutStream& stream) {
  const std::int64_t s = d.s;
  const std::int64_t heads = d.stream_heads > 0 ? d.stream_heads : d.np;
  const std::int64_t sh = (bh / d.np) * heads + d.first_head + bh % d.np;
  constexpr std::int64_t kChunk = 256;
  std::array<float, kChunk> factors;
  for (std::int64_t i = 0; i < s; ++i) {
    const std::int64_t row = i * s;
    for (std::int64_t j0 = 0; j0 <= i; j0 += kChunk) {
      const std::int64_t count = std::min(kChunk, i + 1 - j0);
      attention_dropout_factors(factors.data(), stream,
                                static_cast<std::uint64_t>(sh * s * s + row + j0), count);
      for (std::int64_t k = 0; k < count; ++k) {
        dropped[row + j0 + k] = probs[row + j0 + k] * factors[static_cast<std::size_t>(k)];
      }
      if (dprobs == nullptr) continue;
      for (std::int64_t k = 0; k < count; ++k) {
        dprobs[row + j0 + k] *= factors[static_cast<std::size_t>(k)];
      }
    }
    std::fill(dropped + row + i + 1, dropped + row + s, 0.0f);
    if (dprobs != nullptr) std::fill(dprobs + row + i + 1, dprobs + row + s, 0.0f);
  }
}

// The causal products of one (batch, head) slice skip what the mask makes zero: query rows go in
// blocks of kCausalBlock, and a block only meets the keys up to its last row. That saves nearly
// half of the attention GEMMs at long sequences. Entries above the diagonal of a score block are
// computed but never read (the softmax and its backward zero them); every operand read above the
// diagonal is an exact zero (probabilities, dropped probabilities, score gradients).
constexpr std::int64_t kCausalBlock = 64;

// out[i, j] = alpha · Σ_d a[i, d]·b[j, d] for j < the end of i's block (scores q·kᵀ, dprobs =
// dctx·vᵀ); out is s × s, a and b are s × hn strided views.
void causal_scores(float* out, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                   float alpha, std::int64_t s, std::int64_t hn) {
  for (std::int64_t r0 = 0; r0 < s; r0 += kCausalBlock) {
    const std::int64_t r1 = std::min(s, r0 + kCausalBlock);
    gemm_on_this_thread(r1 - r0, r1, hn, alpha, {a + r0 * lda, lda, false}, {b, ldb, true}, 0.0f,
                        out + r0 * s, s);
  }
}

// out[i] = alpha · Σ_{j ≤ i} p[i, j]·b[j] + beta · out[i] (ctx = probs·v, dq += α·dS·k).
void causal_times(float* out, std::int64_t ldo, const float* p, const float* b, std::int64_t ldb,
                  float alpha, float beta, std::int64_t s, std::int64_t hn) {
  for (std::int64_t r0 = 0; r0 < s; r0 += kCausalBlock) {
    const std::int64_t r1 = std::min(s, r0 + kCausalBlock);
    gemm_on_this_thread(r1 - r0, hn, r1, alpha, {p + r0 * s, s, false}, {b, ldb, false}, beta,
                        out + r0 * ldo, ldo);
  }
}

// out[j] += alpha · Σ_{i ≥ j} p[i, j]·b[i] (dv += probsᵀ·dctx, dk += α·dSᵀ·q).
void causal_transposed_times(float* out, std::int64_t ldo, const float* p, const float* b,
                             std::int64_t ldb, float alpha, std::int64_t s, std::int64_t hn) {
  for (std::int64_t c0 = 0; c0 < s; c0 += kCausalBlock) {
    const std::int64_t c1 = std::min(s, c0 + kCausalBlock);
    gemm_on_this_thread(c1 - c0, hn, s - c0, alpha, {p + c0 * s + c0, s, true},
                        {b + c0 * ldb, ldb, false}, 1.0f, out + c0 * ldo, ldo);
  }
}

}  // namespace

// Each thread takes whole (batch, head) slices: their GEMMs run single-threaded one after the
// other and the softmax of a slice follows its scores while they are still in cache. Every slice
// writes only its own part of probs, ctx and dqkv.
void attention_probs_forward(float* probs, const float* qkv, AttentionDims d, float coeff,
                             const float* key_bias) {
  const float alpha = score_alpha(d, coeff);
  const float beta = 1.0f / coeff;
  const std::int64_t s = d.s;
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    causal_scores(probs + at.probs, qkv + at.qkv, qkv_ld(d), qkv + at.qkv + d.hn, qkv_ld(d), alpha,
                  s, d.hn);
    const float* bias = key_bias != nullptr ? key_bias + (bh % d.np) * s : nullptr;
    for (std::int64_t i = 0; i < s; ++i) {
      float* row = probs + at.probs + i * s;
      if (bias != nullptr) {
        for (std::int64_t j = 0; j <= i; ++j) row[j] = beta * bias[j] + row[j];
      }
      causal_softmax_row(row, i, s, coeff);
    }
  }
}

void attention_context_forward(float* ctx, const float* probs, const float* qkv, AttentionDims d) {
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    causal_times(ctx + at.ctx, ctx_ld(d), probs + at.probs, qkv + at.qkv + 2 * d.hn, qkv_ld(d),
                 1.0f, 0.0f, d.s, d.hn);
  }
}

void attention_context_backward(float* dprobs, float* dqkv, const float* dctx, const float* probs,
                                const float* qkv, AttentionDims d) {
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    // dprobs = dctx · vᵀ, dv += probsᵀ · dctx
    causal_scores(dprobs + at.probs, dctx + at.ctx, ctx_ld(d), qkv + at.qkv + 2 * d.hn, qkv_ld(d),
                  1.0f, d.s, d.hn);
    causal_transposed_times(dqkv + at.qkv + 2 * d.hn, qkv_ld(d), probs + at.probs, dctx + at.ctx,
                            ctx_ld(d), 1.0f, d.s, d.hn);
  }
}

void attention_probs_backward(float* dqkv, float* dprobs, const float* probs, const float* qkv,
                              AttentionDims d, float coeff) {
  const std::int64_t s = d.s;
  const float alpha = score_alpha(d, coeff);
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    for (std::int64_t i = 0; i < s; ++i) {
      causal_softmax_backward_row(dprobs + at.probs + i * s, probs + at.probs + i * s, i, s, coeff);
    }
    // dq += α · dS · k, dk += α · dSᵀ · q
    causal_times(dqkv + at.qkv, qkv_ld(d), dprobs + at.probs, qkv + at.qkv + d.hn, qkv_ld(d), alpha,
                 1.0f, s, d.hn);
    causal_transposed_times(dqkv + at.qkv + d.hn, qkv_ld(d), dprobs + at.probs, qkv + at.qkv,
                            qkv_ld(d), alpha, s, d.hn);
  }
}

void attention_context_forward_with_dropout(float* ctx, float* dropped, const float* probs,
                                            const float* qkv, AttentionDims d,
                                            const DropoutStream& stream) {
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    causal_dropout_slice(dropped + at.probs, nullptr, probs + at.probs, bh, d, stream);
    causal_times(ctx + at.ctx, ctx_ld(d), dropped + at.probs, qkv + at.qkv + 2 * d.hn, qkv_ld(d),
                 1.0f, 0.0f, d.s, d.hn);
  }
}

void attention_context_backward_with_dropout(float* dprobs, float* dqkv, float* dropped,
                                             const float* dctx, const float* probs,
                                             const float* qkv, AttentionDims d,
                                             const DropoutStream& stream) {
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    // dprobs = dctx · vᵀ, then one mask draw gives both its dropout backward and the dropped
    // probabilities the forward's context product used.
    causal_scores(dprobs + at.probs, dctx + at.ctx, ctx_ld(d), qkv + at.qkv + 2 * d.hn, qkv_ld(d),
                  1.0f, d.s, d.hn);
    causal_dropout_slice(dropped + at.probs, dprobs + at.probs, probs + at.probs, bh, d, stream);
    // dv += dropped probsᵀ · dctx
    causal_transposed_times(dqkv + at.qkv + 2 * d.hn, qkv_ld(d), dropped + at.probs, dctx + at.ctx,
                            ctx_ld(d), 1.0f, d.s, d.hn);
  }
}

}  // namespace mds::ops::cpu
