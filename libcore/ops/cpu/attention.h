// CPU reference of ops/attention.h; arguments are validated by the public functions.
#pragma once
#include <cstdint>

#include "ops/dropout.h"

namespace mds::ops::cpu {

struct AttentionDims {
  std::int64_t s;   // sequence length
  std::int64_t b;   // micro-batch size
  std::int64_t np;  // heads
  std::int64_t hn;  // head dim
  // Dropout numbering: these np heads are heads [first_head, first_head + np) of a layer with
  // stream_heads heads (training.md §2.2: a TP rank holds whole heads).
  std::int64_t first_head = 0;
  std::int64_t stream_heads = 0;  // 0: np
};

// key_bias: null, or [np, s] added to each head's scores as upstream's ALiBi baddbmm does
// (S = bias/coeff + α·q·kᵀ, before the softmax of coeff·S).
void attention_probs_forward(float* probs, const float* qkv, AttentionDims d, float coeff,
                             const float* key_bias = nullptr);
void attention_context_forward(float* ctx, const float* probs, const float* qkv, AttentionDims d);
void attention_context_backward(float* dprobs, float* dqkv, const float* dctx, const float* probs,
                                const float* qkv, AttentionDims d);
void attention_probs_backward(float* dqkv, float* dprobs, const float* probs, const float* qkv,
                              AttentionDims d, float coeff);
void attention_context_forward_with_dropout(float* ctx, float* dropped, const float* probs,
                                            const float* qkv, AttentionDims d,
                                            const DropoutStream& stream);
void attention_context_backward_with_dropout(float* dprobs, float* dqkv, float* dropped,
                                             const float* dctx, const float* probs,
                                             const float* qkv, AttentionDims d,
                                             const DropoutStream& stream);

}  // namespace mds::ops::cpu
