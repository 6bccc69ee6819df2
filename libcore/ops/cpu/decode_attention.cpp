#include "ops/cpu/decode_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mds::ops::cpu {

namespace {

// Offset of position 0 of (row, head) in a [b, np, capacity, hn] cache.
std::int64_t cache_slot(const DecodeAttentionDims& d, std::int64_t row, std::int64_t head) {
  return (row * d.np + head) * d.capacity * d.hn;
}

}  // namespace

void kv_cache_append(float* keys, float* values, const float* qkv, DecodeAttentionDims d) {
  const std::int64_t ld = d.np * 3 * d.hn;
  // Per token the fused QKV holds, head after head, q then k then v (checkpoint version 3.0).
  for (std::int64_t r = 0; r < d.b; ++r) {
    for (std::int64_t head = 0; head < d.np; ++head) {
      float* k = keys + cache_slot(d, r, head);
      float* v = values + cache_slot(d, r, head);
      for (std::int64_t i = 0; i < d.count; ++i) {
        const float* token = qkv + (r * d.count + i) * ld + head * 3 * d.hn;
        std::copy(token + d.hn, token + 2 * d.hn, k + (d.past + i) * d.hn);
        std::copy(token + 2 * d.hn, token + 3 * d.hn, v + (d.past + i) * d.hn);
      }
    }
  }
}

// One query row at a time with plain sequential sums (the CUDA kernel sums each dot product in the
// same order; its softmax sum and weighted value sums are split into fixed partial sums).
void decode_attention_forward(float* ctx, const float* qkv, const float* keys, const float* values,
                              DecodeAttentionDims d, float coeff, const float* key_bias,
                              std::int64_t key_bias_ld) {
  const std::int64_t hn = d.hn, ld = d.np * 3 * hn;
  // α = 1/norm_factor in double, as ops/cpu/attention.cpp's score_alpha.
  const float alpha = static_cast<float>(1.0 / (std::sqrt(static_cast<double>(hn)) * coeff));
  const float beta = 1.0f / coeff;
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<std::size_t>(d.past + d.count));
#pragma omp for collapse(3) schedule(static)
    for (std::int64_t r = 0; r < d.b; ++r) {
      for (std::int64_t head = 0; head < d.np; ++head) {
        for (std::int64_t i = 0; i < d.count; ++i) {
          const float* k = keys + cache_slot(d, r, head);
          const float* v = values + cache_slot(d, r, head);
          const float* q = qkv + (r * d.count + i) * ld + head * 3 * hn;
          const std::int64_t visible = d.past + i + 1;  // the causal mask
          const float* bias = key_bias != nullptr ? key_bias + head * key_bias_ld : nullptr;
          float max = -INFINITY;
          for (std::int64_t j = 0; j < visible; ++j) {
            float dot = 0.0f;
            for (std::int64_t e = 0; e < hn; ++e) dot += q[e] * k[j * hn + e];
            const float score = bias != nullptr ? beta * bias[j] + alpha * dot : alpha * dot;
            scores[static_cast<std::size_t>(j)] = score * coeff;
            max = std::fmax(max, scores[static_cast<std::size_t>(j)]);
          }
          float sum = 0.0f;
          for (std::int64_t j = 0; j < visible; ++j) {
            float& p = scores[static_cast<std::size_t>(j)];
            p = std::exp(p - max);
            sum += p;
          }
          const float inv = 1.0f / sum;
          float* out = ctx + (r * d.count + i) * d.np * hn + head * hn;
          std::fill(out, out + hn, 0.0f);
          for (std::int64_t j = 0; j < visible; ++j) {
            const float p = scores[static_cast<std::size_t>(j)] * inv;
            for (std::int64_t e = 0; e < hn; ++e) out[e] += p * v[j * hn + e];
          }
        }
      }
    }
  }
}

}  // namespace mds::ops::cpu
