#include <cmath>
#include <type_traits>

#include "base/error.h"
#include "kernels/attention_io_cuda.cuh"
#include "kernels/check.h"
#include "kernels/decode_attention.h"
#include "kernels/decode_attention_kernels.cuh"
#include "kernels/device_common.cuh"
#include "kernels/head_dim_dispatch.cuh"

namespace mds::kernels {

namespace {

using detail::with_head_dim;
using namespace decode_detail;

}  // namespace

bool decode_attention_head_dim_supported(std::int64_t hn) {
  return hn == 8 || hn == 16 || hn == 32 || hn == 64 || hn == 96 || hn == 128;
}

void kv_cache_append(void* keys, void* values, const void* qkv, tensor::DType dtype,
                     ops::cpu::DecodeAttentionDims d, cudaStream_t stream) {
  const std::int64_t n = d.b * d.count * d.np * d.hn;
  attention_io::with_io(dtype, "kv_cache_append", [&](auto io) {
    using Elem = typename decltype(io)::Elem;
    if (n <= 0) return;
    append_kernel<Elem><<<detail::grid_for(n), kThreads, 0, stream>>>(
        static_cast<Elem*>(keys), static_cast<Elem*>(values), static_cast<const Elem*>(qkv),
        {d.count, d.np, d.past, d.capacity}, d.hn, n);
    check_launch("kernels::kv_cache_append");
  });
}

void kv_cache_append(float* keys, float* values, const float* qkv, ops::cpu::DecodeAttentionDims d,
                     cudaStream_t stream) {
  kv_cache_append(static_cast<void*>(keys), static_cast<void*>(values),
                  static_cast<const void*>(qkv), tensor::DType::kFloat32, d, stream);
}

void decode_attention_forward(float* ctx, const float* qkv, const float* keys, const float* values,
                              ops::cpu::DecodeAttentionDims d, float coeff, cudaStream_t stream) {
  decode_attention_forward(static_cast<void*>(ctx), static_cast<const void*>(qkv),
                           static_cast<const void*>(keys), static_cast<const void*>(values),
                           tensor::DType::kFloat32, d, coeff, stream);
}

void decode_attention_forward(void* ctx, const void* qkv, const void* keys, const void* values,
                              tensor::DType dtype, ops::cpu::DecodeAttentionDims d, float coeff,
                              cudaStream_t stream, const float* key_bias,
                              std::int64_t key_bias_ld) {
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
  attention_io::with_io(dtype, "decode_attention_forward", [&](auto io) {
    using Io = decltype(io);
    using Elem = typename Io::Elem;
    with_head_dim(d.hn, "decode_attention_forward", [&](auto hn) {
      constexpr int kHn = decltype(hn)::value;
      const std::size_t bytes =
          sizeof(float) * static_cast<std::size_t>(shared_floats<kHn>(d.past + d.count));
      // Past 48 KiB (about 12000 positions) the kernel must opt in; beyond the device's limit
      // this fails naming the op.
      allow_dynamic_shared_memory(reinterpret_cast<const void*>(decode_kernel<kHn, Io>), bytes,
                                  "kernels::decode_attention_forward (shared memory)");
      decode_kernel<kHn, Io><<<grid, kThreads, bytes, stream>>>(
          static_cast<Elem*>(ctx), static_cast<const Elem*>(qkv), static_cast<const Elem*>(keys),
          static_cast<const Elem*>(values),
          {d.count, d.np, d.past, d.capacity, key_bias, key_bias_ld}, alpha, coeff);
    });
  });
  check_launch("kernels::decode_attention_forward");
}

}  // namespace mds::kernels
