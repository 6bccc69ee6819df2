// Device code of kernels/decode_attention.cu (launched from there): plain CUDA with no runtime
// includes, so that tests/unit/kernels_emulated_decode_attention_test.cpp can also compile it for
// the CPU under a SIMT emulation (tests/unit/simt_emulation.h) and run it without a GPU.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/attention_io.cuh"

namespace mds::kernels::decode_detail {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

struct Geometry {
  std::int64_t count, np, past, capacity;
  // ALiBi (null: none): fp32 [np, key_bias_ld], key j of head h adds key_bias[h·ld + j]/coeff to
  // the score, as the host twin cpu::decode_attention_forward.
  const float* key_bias = nullptr;
  std::int64_t key_bias_ld = 0;
};

// Chunks of the visible positions whose weighted value sums run side by side, one thread per
// (chunk, head-dim element).
template <int kHn>
constexpr int kChunks = kThreads / kHn;

// Shared floats of decode_kernel: q (kHn), the chunks' partial contexts (kChunks·kHn), reduction
// scratch (kWarps), the scores of `positions` visible keys.
template <int kHn>
constexpr std::int64_t shared_floats(std::int64_t positions) {
  return kHn + kChunks<kHn> * kHn + kWarps + positions;
}

// Block reductions with a fixed order (a warp butterfly, then the warps in order), as
// device_common.cuh's; every thread gets the result. `scratch` holds kWarps floats.
__device__ inline float block_reduce(float value, float* scratch, bool take_max) {
  for (int delta = 16; delta > 0; delta /= 2) {
    const float other = __shfl_xor_sync(0xFFFFFFFFu, value, delta);
    value = take_max ? (other > value ? other : value) : value + other;
  }
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = scratch[0];
  for (int w = 1; w < kWarps; ++w) {
    total = take_max ? (scratch[w] > total ? scratch[w] : total) : total + scratch[w];
  }
  return total;
}

// keys/values [b, np, capacity, hn] at positions [past, past + count) ← the k and v parts of
// qkv [b, count, np·3·hn]; a grid-stride loop over the n = b·count·np·hn elements, copying
// elements of any storage bit for bit. Static: the emulation test compiles its own copy of this
// kernel next to the library's.
template <typename Elem>
static __global__ void append_kernel(Elem* keys, Elem* values, const Elem* qkv, Geometry g,
                                     std::int64_t hn, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; idx < n;
       idx += stride) {
    const std::int64_t e = idx % hn, token_head = idx / hn;
    const std::int64_t head = token_head % g.np, token = token_head / g.np;
    const std::int64_t row = token / g.count, i = token % g.count;
    const Elem* from = qkv + token * g.np * 3 * hn + head * 3 * hn;
    const std::int64_t to = ((row * g.np + head) * g.capacity + g.past + i) * hn + e;
    keys[to] = from[hn + e];
    values[to] = from[2 * hn + e];
  }
}

// One block per (row, head) slice (grid x) and new position (grid y): the scores of the visible
// keys in shared memory, each dot product summed over the head dim in order (the CPU's order);
// the block's max and sum; then kChunks contiguous chunks of positions summed side by side and
// added in chunk order. Activations (qkv, the cache, ctx) in the storage of `Io`
// (attention_io.cuh): loads widened, ctx rounded once; the math fp32.
template <int kHn, typename Io = attention_io::Fp32Io>
__global__ void __launch_bounds__(kThreads)
    decode_kernel(typename Io::Elem* ctx, const typename Io::Elem* qkv,
                  const typename Io::Elem* keys, const typename Io::Elem* values, Geometry g,
                  float alpha, float coeff) {
  extern __shared__ float smem[];
  float* q = smem;
  float* partial = q + kHn;
  float* scratch = partial + kChunks<kHn> * kHn;
  float* scores = scratch + kWarps;
  const std::int64_t slice = blockIdx.x, i = blockIdx.y;
  const std::int64_t row = slice / g.np, head = slice % g.np;
  const std::int64_t token = row * g.count + i;
  const typename Io::Elem* k = keys + slice * g.capacity * kHn;
  const typename Io::Elem* v = values + slice * g.capacity * kHn;
  const int t = static_cast<int>(threadIdx.x);
  if (t < kHn) q[t] = Io::load(qkv, token * g.np * 3 * kHn + head * 3 * kHn + t);
  __syncthreads();

  const std::int64_t visible = g.past + i + 1;  // the causal mask
  float local_max = -INFINITY;
  for (std::int64_t j = t; j < visible; j += kThreads) {
    float dot = 0.0f;
    for (int e = 0; e < kHn; ++e) dot += q[e] * Io::load(k, j * kHn + e);
    const float score = alpha * dot;
    const float z =
        (g.key_bias != nullptr ? (1.0f / coeff) * g.key_bias[head * g.key_bias_ld + j] + score
                               : score) *
        coeff;
    scores[j] = z;
    local_max = z > local_max ? z : local_max;
  }
  const float max = block_reduce(local_max, scratch, true);
  float local_sum = 0.0f;
  for (std::int64_t j = t; j < visible; j += kThreads) {
    const float p = expf(scores[j] - max);
    scores[j] = p;
    local_sum += p;
  }
  // The reduction synchronizes the block: every score is written before the chunks read them.
  const float inv = 1.0f / block_reduce(local_sum, scratch, false);

  const int e = t % kHn, chunk = t / kHn;
  if (chunk < kChunks<kHn>) {
    const std::int64_t per = (visible + kChunks<kHn> - 1) / kChunks<kHn>;
    const std::int64_t begin = chunk * per;
    const std::int64_t end = begin + per < visible ? begin + per : visible;
    float acc = 0.0f;
    for (std::int64_t j = begin; j < end; ++j) acc += (scores[j] * inv) * Io::load(v, j * kHn + e);
    partial[chunk * kHn + e] = acc;
  }
  __syncthreads();
  if (t < kHn) {
    float out = 0.0f;
    for (int c = 0; c < kChunks<kHn>; ++c) out += partial[c * kHn + t];
    Io::store(ctx, token * g.np * kHn + head * kHn + t, out);
  }
}

}  // namespace mds::kernels::decode_detail
