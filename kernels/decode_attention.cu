#include <cmath>
#include <type_traits>

#include "base/error.h"
#include "kernels/check.h"
#include "kernels/decode_attention.h"
#include "kernels/device_common.cuh"

namespace mds::kernels {

namespace {

using detail::kThreads;
using detail::kWarps;

struct Geometry {
  std::int64_t count, np, past, capacity;
};

__global__ void append_kernel(float* keys, float* values, const float* qkv, Geometry g,
                              std::int64_t hn, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += stride) {
    const std::int64_t e = idx % hn, token_head = idx / hn;
    const std::int64_t head = token_head % g.np, token = token_head / g.np;
    const std::int64_t row = token / g.count, i = token % g.count;
    const float* from = qkv + token * g.np * 3 * hn + head * 3 * hn;
    const std::int64_t to = ((row * g.np + head) * g.capacity + g.past + i) * hn + e;
    keys[to] = from[hn + e];
    values[to] = from[2 * hn + e];
  }
}

// Chunks of the visible positions whose weighted value sums run side by side, one thread per
// (chunk, head-dim element).
template <int kHn>
constexpr int kChunks = kThreads / kHn;

// Shared memory: q (kHn), the chunks' partial contexts (kChunks·kHn), reduction scratch (kWarps),
// the scores of the visible positions.
template <int kHn>
std::size_t shared_bytes(std::int64_t positions) {
  return sizeof(float) * static_cast<std::size_t>(kHn + kChunks<kHn> * kHn + kWarps + positions);
}

// Grid x: the b·np (row, head) slices; grid y: the new positions.
template <int kHn>
__global__ void __launch_bounds__(kThreads)
    decode_kernel(float* ctx, const float* qkv, const float* keys, const float* values, Geometry g,
                  float alpha, float coeff) {
  extern __shared__ float shared[];
  float* q = shared;
  float* partial = q + kHn;
  float* scratch = partial + kChunks<kHn> * kHn;
  float* scores = scratch + kWarps;
  const std::int64_t slice = blockIdx.x, i = blockIdx.y;
  const std::int64_t row = slice / g.np, head = slice % g.np;
  const std::int64_t token = row * g.count + i;
  const float* k = keys + slice * g.capacity * kHn;
  const float* v = values + slice * g.capacity * kHn;
  const int t = static_cast<int>(threadIdx.x);
  if (t < kHn) q[t] = qkv[token * g.np * 3 * kHn + head * 3 * kHn + t];
  __syncthreads();

  const std::int64_t visible = g.past + i + 1;  // the causal mask
  float local_max = -INFINITY;
  for (std::int64_t j = t; j < visible; j += kThreads) {
    float dot = 0.0f;
    for (int e = 0; e < kHn; ++e) dot += q[e] * k[j * kHn + e];
    const float z = (alpha * dot) * coeff;
    scores[j] = z;
    local_max = z > local_max ? z : local_max;
  }
  const float max = detail::block_max(local_max, scratch);
  float local_sum = 0.0f;
  for (std::int64_t j = t; j < visible; j += kThreads) {
    const float p = expf(scores[j] - max);
    scores[j] = p;
    local_sum += p;
  }
  // block_sum synchronizes the block: every score is written before the chunks read them.
  const float inv = 1.0f / detail::block_sum(local_sum, scratch);

  const int e = t % kHn, chunk = t / kHn;
  if (chunk < kChunks<kHn>) {
    const std::int64_t per = (visible + kChunks<kHn> - 1) / kChunks<kHn>;
    const std::int64_t begin = chunk * per;
    const std::int64_t end = begin + per < visible ? begin + per : visible;
    float acc = 0.0f;
    for (std::int64_t j = begin; j < end; ++j) acc += (scores[j] * inv) * v[j * kHn + e];
    partial[chunk * kHn + e] = acc;
  }
  __syncthreads();
  if (t < kHn) {
    float out = 0.0f;
    for (int c = 0; c < kChunks<kHn>; ++c) out += partial[c * kHn + t];
    ctx[token * g.np * kHn + head * kHn + t] = out;
  }
}

template <typename Body>
void with_head_dim(std::int64_t hn, Body body) {
  switch (hn) {
    case 8:
      return body(std::integral_constant<int, 8>{});
    case 16:
      return body(std::integral_constant<int, 16>{});
    case 32:
      return body(std::integral_constant<int, 32>{});
    case 64:
      return body(std::integral_constant<int, 64>{});
    case 96:
      return body(std::integral_constant<int, 96>{});
    case 128:
      return body(std::integral_constant<int, 128>{});
    default:
      base::fail("cuda: kernels::decode_attention_forward: head dim ", hn,
                 " has no kernel (8, 16, 32, 64, 96 or 128)");
  }
}

}  // namespace

bool decode_attention_head_dim_supported(std::int64_t hn) {
  return hn == 8 || hn == 16 || hn == 32 || hn == 64 || hn == 96 || hn == 128;
}

void kv_cache_append(float* keys, float* values, const float* qkv, ops::cpu::DecodeAttentionDims d,
                     cudaStream_t stream) {
  const std::int64_t n = d.b * d.count * d.np * d.hn;
  if (n <= 0) return;
  append_kernel<<<detail::grid_for(n), kThreads, 0, stream>>>(
      keys, values, qkv, {d.count, d.np, d.past, d.capacity}, d.hn, n);
  check_launch("kernels::kv_cache_append");
}

void decode_attention_forward(float* ctx, const float* qkv, const float* keys, const float* values,
                              ops::cpu::DecodeAttentionDims d, float coeff, cudaStream_t stream) {
  if (d.b <= 0 || d.np <= 0 || d.count <= 0) return;
  const std::int64_t slices = d.b * d.np;
  if (slices > 0x7FFFFFFF || d.count > 65535) {
    base::fail("cuda: kernels::decode_attention_forward: b·np = ", slices, " or count = ", d.count,
               " exceeds the grid");
  }
  if (!(coeff >= 1.0f)) {
    base::fail("cuda: kernels::decode_attention_forward: coeff must be >= 1, got ", coeff);
  }
  // As ops/cpu/decode_attention.cpp.
  const float alpha = static_cast<float>(1.0 / (std::sqrt(static_cast<double>(d.hn)) * coeff));
  const dim3 grid(static_cast<unsigned>(slices), static_cast<unsigned>(d.count));
  with_head_dim(d.hn, [&](auto hn) {
    constexpr int kHn = decltype(hn)::value;
    const std::size_t bytes = shared_bytes<kHn>(d.past + d.count);
    // Past 48 KiB (about 12000 positions) the kernel must opt in; beyond the device's limit this
    // fails with CUDA's message.
    check_cuda(cudaFuncSetAttribute(decode_kernel<kHn>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bytes)),
               "kernels::decode_attention_forward (shared memory)");
    decode_kernel<kHn><<<grid, kThreads, bytes, stream>>>(
        ctx, qkv, keys, values, {d.count, d.np, d.past, d.capacity}, alpha, coeff);
  });
  check_launch("kernels::decode_attention_forward");
}

}  // namespace mds::kernels
