// Attention of new positions over a key/value cache (inference decoding), the CUDA twin of
// ops/cpu/decode_attention.h, with its layouts (ops/attention.h, "Decode attention"):
//   qkv [b, count, np·3·hn] (per token the heads in order, each q, then k, then v);
//   keys, values [b, np, capacity, hn]; ctx [b, count, np·hn].
// New position i of a row is absolute position past + i and attends to cache positions
// [0, past + i]. Same scaling as the CPU: α = 1/(sqrt(hn)·coeff) rounded from double, the softmax
// of coeff·α·q·kᵀ in fp32.
//
// One block per (row, head, new position): its threads take the visible keys in turn (each dot
// product summed over the head dim in order, as the CPU), keep the scores in shared memory
// (past + count floats), take the block's max and sum (deterministic block reductions), then split
// the visible positions into 256/hn contiguous chunks whose weighted value sums are added in chunk
// order. No atomics: deterministic. No [s, s] matrix: one score row per block.
//
// Activations (qkv, keys, values, ctx) fp32, bf16 or fp16, one dtype for all (`dtype`): loads
// widened exactly, ctx rounded once on store, the math fp32; the append copies bits.
//
// Device pointers, work queued on `stream`. Head dims with a kernel: 8, 16, 32, 64, 96, 128.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cpu/decode_attention.h"
#include "tensor/dtype.h"

namespace mds::kernels {

bool decode_attention_head_dim_supported(std::int64_t hn);

// keys/values at positions [past, past + count) ← the k and v parts of qkv (copies, any hn).
void kv_cache_append(float* keys, float* values, const float* qkv, ops::cpu::DecodeAttentionDims d,
                     cudaStream_t stream);

// ctx (written) from qkv's queries and the cache, whose positions [0, past + count) must hold
// the keys and values (kv_cache_append first).
void decode_attention_forward(float* ctx, const float* qkv, const float* keys, const float* values,
                              ops::cpu::DecodeAttentionDims d, float coeff, cudaStream_t stream);

// The same with activations of `dtype`.
void kv_cache_append(void* keys, void* values, const void* qkv, tensor::DType dtype,
                     ops::cpu::DecodeAttentionDims d, cudaStream_t stream);
// key_bias (ALiBi, device fp32 [np, key_bias_ld ≥ past + count], or null) as the host twin's.
void decode_attention_forward(void* ctx, const void* qkv, const void* keys, const void* values,
                              tensor::DType dtype, ops::cpu::DecodeAttentionDims d, float coeff,
                              cudaStream_t stream, const float* key_bias = nullptr,
                              std::int64_t key_bias_ld = 0);

}  // namespace mds::kernels
