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
// element bh·s² + i·s + j of the stream, as in dropout_forward over the whole tensor.
void causal_dropout_slice(float* dropped, float* dprobs, const float* probs, std::int64_t bh,
                          std::int64_t s, const DropoutStream& stream) {
  constexpr std::int64_t kChunk = 256;
  std::array<float, kChunk> factors;
  for (std::int64_t i = 0; i < s; ++i) {
    const std::int64_t row = i * s;
    for (std::int64_t j0 = 0; j0 <= i; j0 += kChunk) {
      const std::int64_t count = std::min(kChunk, i + 1 - j0);
      dropout_factors(factors.data(), stream, static_cast<std::uint64_t>(bh * s * s + row + j0),
                      count);
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

}  // namespace

// Each thread takes whole (batch, head) slices: their GEMMs run single-threaded one after the
// other and the softmax of a slice follows its scores while they are still in cache. Every slice
// writes only its own part of probs, ctx and dqkv.
void attention_probs_forward(float* probs, const float* qkv, AttentionDims d, float coeff) {
  const float alpha = score_alpha(d, coeff);
  const std::int64_t s = d.s;
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    gemm_on_this_thread(s, s, d.hn, alpha, {qkv + at.qkv, qkv_ld(d), false},
                        {qkv + at.qkv + d.hn, qkv_ld(d), true}, 0.0f, probs + at.probs, s);
    for (std::int64_t i = 0; i < s; ++i) causal_softmax_row(probs + at.probs + i * s, i, s, coeff);
  }
}

void attention_context_forward(float* ctx, const float* probs, const float* qkv, AttentionDims d) {
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    gemm_on_this_thread(d.s, d.hn, d.s, 1.0f, {probs + at.probs, d.s, false},
                        {qkv + at.qkv + 2 * d.hn, qkv_ld(d), false}, 0.0f, ctx + at.ctx, ctx_ld(d));
  }
}

void attention_context_backward(float* dprobs, float* dqkv, const float* dctx, const float* probs,
                                const float* qkv, AttentionDims d) {
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    // dprobs = dctx · vᵀ
    gemm_on_this_thread(d.s, d.s, d.hn, 1.0f, {dctx + at.ctx, ctx_ld(d), false},
                        {qkv + at.qkv + 2 * d.hn, qkv_ld(d), true}, 0.0f, dprobs + at.probs, d.s);
    // dv += probsᵀ · dctx
    gemm_on_this_thread(d.s, d.hn, d.s, 1.0f, {probs + at.probs, d.s, true},
                        {dctx + at.ctx, ctx_ld(d), false}, 1.0f, dqkv + at.qkv + 2 * d.hn,
                        qkv_ld(d));
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
    // dq += α · dS · k
    gemm_on_this_thread(s, d.hn, s, alpha, {dprobs + at.probs, s, false},
                        {qkv + at.qkv + d.hn, qkv_ld(d), false}, 1.0f, dqkv + at.qkv, qkv_ld(d));
    // dk += α · dSᵀ · q
    gemm_on_this_thread(s, d.hn, s, alpha, {dprobs + at.probs, s, true},
                        {qkv + at.qkv, qkv_ld(d), false}, 1.0f, dqkv + at.qkv + d.hn, qkv_ld(d));
  }
}

void attention_context_forward_with_dropout(float* ctx, float* dropped, const float* probs,
                                            const float* qkv, AttentionDims d,
                                            const DropoutStream& stream) {
#pragma omp parallel for schedule(static)
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    causal_dropout_slice(dropped + at.probs, nullptr, probs + at.probs, bh, d.s, stream);
    gemm_on_this_thread(d.s, d.hn, d.s, 1.0f, {dropped + at.probs, d.s, false},
                        {qkv + at.qkv + 2 * d.hn, qkv_ld(d), false}, 0.0f, ctx + at.ctx, ctx_ld(d));
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
    gemm_on_this_thread(d.s, d.s, d.hn, 1.0f, {dctx + at.ctx, ctx_ld(d), false},
                        {qkv + at.qkv + 2 * d.hn, qkv_ld(d), true}, 0.0f, dprobs + at.probs, d.s);
    causal_dropout_slice(dropped + at.probs, dprobs + at.probs, probs + at.probs, bh, d.s, stream);
    // dv += dropped probsᵀ · dctx
    gemm_on_this_thread(d.s, d.hn, d.s, 1.0f, {dropped + at.probs, d.s, true},
                        {dctx + at.ctx, ctx_ld(d), false}, 1.0f, dqkv + at.qkv + 2 * d.hn,
                        qkv_ld(d));
  }
}

}  // namespace mds::ops::cpu
