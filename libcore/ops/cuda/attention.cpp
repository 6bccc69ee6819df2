#include "kernels/attention.h"
#include "kernels/decode_attention.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

bool attention_head_dim_supported(std::int64_t hn) {
  return kernels::attention_head_dim_supported(hn);
}

bool attention_tensor_core_supported(tensor::DType dtype, std::int64_t hn) {
  return kernels::attention_tensor_core_supported(dtype, hn);
}

void attention_forward(const DeviceContext& ctx, void* context, float* lse, const void* qkv,
                       tensor::DType dtype, cpu::AttentionDims d, float coeff,
                       const DropoutStream& dropout, std::uint32_t* keep_bits,
                       const float* key_bias) {
  kernels::attention_forward(context, lse, qkv, dtype, d, coeff, dropout, stream_of(ctx),
                             kernels::AttentionKernel::kAuto, keep_bits,
                             ctx.cuda().kernel_shapes.get(), key_bias);
}

void attention_backward(const DeviceContext& ctx, void* dqkv, const void* dcontext,
                        const void* context, const float* lse, const void* qkv, tensor::DType dtype,
                        cpu::AttentionDims d, float coeff, const DropoutStream& dropout,
                        bool accumulate, const std::uint32_t* keep_bits, const float* key_bias) {
  kernels::attention_backward(dqkv, dcontext, context, lse, qkv, dtype, d, coeff, dropout,
                              stream_of(ctx), kernels::AttentionKernel::kAuto, accumulate,
                              keep_bits, &ctx.cuda().scratch, ctx.cuda().kernel_shapes.get(),
                              key_bias);
}

bool decode_attention_head_dim_supported(std::int64_t hn) {
  return kernels::decode_attention_head_dim_supported(hn);
}

void kv_cache_append(const DeviceContext& ctx, void* keys, void* values, const void* qkv,
                     tensor::DType dtype, cpu::DecodeAttentionDims d) {
  kernels::kv_cache_append(keys, values, qkv, dtype, d, stream_of(ctx));
}

void decode_attention_forward(const DeviceContext& ctx, void* context, const void* qkv,
                              const void* keys, const void* values, tensor::DType dtype,
                              cpu::DecodeAttentionDims d, float coeff, const float* key_bias,
                              std::int64_t key_bias_ld) {
  kernels::decode_attention_forward(context, qkv, keys, values, dtype, d, coeff, stream_of(ctx),
                                    key_bias, key_bias_ld);
}

}  // namespace mds::ops::cuda
