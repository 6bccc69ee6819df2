#include "ops/cpu/attention.h"

#include <cblas.h>

#include <cmath>

namespace mds::ops::cpu {

namespace {

blasint to_blas(std::int64_t v) {
  return static_cast<blasint>(v);
}

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

blasint qkv_ld(const AttentionDims& d) {
  return to_blas(d.b * d.np * 3 * d.hn);
}
blasint ctx_ld(const AttentionDims& d) {
  return to_blas(d.b * d.np * d.hn);
}

}  // namespace

// The GEMMs run one (batch, head) at a time and let OpenBLAS thread inside each; the row-wise
// softmax loops use OpenMP. (This OpenBLAS is the pthread build, which must not be called from
// inside an OpenMP parallel region.)
void attention_probs_forward(float* probs, const float* qkv, AttentionDims d, float coeff) {
  const float alpha = score_alpha(d, coeff);
  const std::int64_t s = d.s;
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, to_blas(s), to_blas(s), to_blas(d.hn),
                alpha, qkv + at.qkv, qkv_ld(d), qkv + at.qkv + d.hn, qkv_ld(d), 0.0f,
                probs + at.probs, to_blas(s));
  }
  // Softmax in fp32 over key positions 0..i (the causal mask); masked entries become exact zeros,
  // as exp(finfo.min − max) and the fused kernel's −inf both do.
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < d.b * d.np * s; ++row) {
    const std::int64_t i = row % s;
    float* p = probs + row * s;
    float max = -INFINITY;
    for (std::int64_t j = 0; j <= i; ++j) {
      p[j] *= coeff;
      max = std::fmax(max, p[j]);
    }
    float sum = 0.0f;
    for (std::int64_t j = 0; j <= i; ++j) {
      p[j] = std::exp(p[j] - max);
      sum += p[j];
    }
    const float inv = 1.0f / sum;
    for (std::int64_t j = 0; j <= i; ++j) p[j] *= inv;
    for (std::int64_t j = i + 1; j < s; ++j) p[j] = 0.0f;
  }
}

void attention_context_forward(float* ctx, const float* probs, const float* qkv, AttentionDims d) {
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, to_blas(d.s), to_blas(d.hn),
                to_blas(d.s), 1.0f, probs + at.probs, to_blas(d.s), qkv + at.qkv + 2 * d.hn,
                qkv_ld(d), 0.0f, ctx + at.ctx, ctx_ld(d));
  }
}

void attention_context_backward(float* dprobs, float* dqkv, const float* dctx, const float* probs,
                                const float* qkv, AttentionDims d) {
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    // dprobs = dctx · vᵀ
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, to_blas(d.s), to_blas(d.s), to_blas(d.hn),
                1.0f, dctx + at.ctx, ctx_ld(d), qkv + at.qkv + 2 * d.hn, qkv_ld(d), 0.0f,
                dprobs + at.probs, to_blas(d.s));
    // dv += probsᵀ · dctx
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, to_blas(d.s), to_blas(d.hn), to_blas(d.s),
                1.0f, probs + at.probs, to_blas(d.s), dctx + at.ctx, ctx_ld(d), 1.0f,
                dqkv + at.qkv + 2 * d.hn, qkv_ld(d));
  }
}

void attention_probs_backward(float* dqkv, float* dprobs, const float* probs, const float* qkv,
                              AttentionDims d, float coeff) {
  const std::int64_t s = d.s;
  // Softmax backward of z = coeff·S: dS = coeff · p ⊙ (dp − Σ_j p_j·dp_j), zero where masked.
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < d.b * d.np * s; ++row) {
    const std::int64_t i = row % s;
    const float* p = probs + row * s;
    float* g = dprobs + row * s;
    float dot = 0.0f;
    for (std::int64_t j = 0; j <= i; ++j) dot += p[j] * g[j];
    for (std::int64_t j = 0; j <= i; ++j) g[j] = coeff * (p[j] * (g[j] - dot));
    for (std::int64_t j = i + 1; j < s; ++j) g[j] = 0.0f;
  }
  const float alpha = score_alpha(d, coeff);
  for (std::int64_t bh = 0; bh < d.b * d.np; ++bh) {
    const Slice at = slice(d, bh);
    // dq += α · dS · k
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, to_blas(s), to_blas(d.hn), to_blas(s),
                alpha, dprobs + at.probs, to_blas(s), qkv + at.qkv + d.hn, qkv_ld(d), 1.0f,
                dqkv + at.qkv, qkv_ld(d));
    // dk += α · dSᵀ · q
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, to_blas(s), to_blas(d.hn), to_blas(s),
                alpha, dprobs + at.probs, to_blas(s), qkv + at.qkv, qkv_ld(d), 1.0f,
                dqkv + at.qkv + d.hn, qkv_ld(d));
  }
}

}  // namespace mds::ops::cpu
