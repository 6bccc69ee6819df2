// CPU reference of ops/attention.h's decode attention (attention over a key/value cache);
// arguments are validated by the public functions.
#pragma once
#include <cstdint>

namespace mds::ops::cpu {

struct DecodeAttentionDims {
  std::int64_t b;         // rows (sequences) of the batch
  std::int64_t count;     // new positions per row
  std::int64_t np;        // heads
  std::int64_t hn;        // head dim
  std::int64_t past;      // positions already in the cache before the new ones
  std::int64_t capacity;  // positions the cache holds
};

// keys/values [b, np, capacity, hn] at positions [past, past + count) ← the k and v parts of
// qkv [b, count, np·3·hn].
void kv_cache_append(float* keys, float* values, const float* qkv, DecodeAttentionDims d);

// ctx [b, count, np·hn] (written): new position i of a row (absolute position past + i) attends to
// the cached keys and values [0, past + i] of its row and head.
// key_bias: null, or [np, key_bias_ld] added as attention_probs_forward adds it (ALiBi), for key
// positions j < past + count ≤ key_bias_ld.
void decode_attention_forward(float* ctx, const float* qkv, const float* keys, const float* values,
                              DecodeAttentionDims d, float coeff, const float* key_bias = nullptr,
                              std::int64_t key_bias_ld = 0);

}  // namespace mds::ops::cpu
