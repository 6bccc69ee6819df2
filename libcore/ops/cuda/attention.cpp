#include "kernels/attention.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

bool attention_head_dim_supported(std::int64_t hn) {
  return kernels::attention_head_dim_supported(hn);
}

void attention_forward(const DeviceContext& ctx, float* context, float* lse, const float* qkv,
                       cpu::AttentionDims d, float coeff, const DropoutStream& dropout) {
  kernels::attention_forward(context, lse, qkv, d, coeff, dropout, stream_of(ctx));
}

void attention_backward(const DeviceContext& ctx, float* dqkv, const float* dcontext,
                        const float* context, const float* lse, const float* qkv,
                        cpu::AttentionDims d, float coeff, const DropoutStream& dropout) {
  kernels::attention_backward(dqkv, dcontext, context, lse, qkv, d, coeff, dropout, stream_of(ctx));
}

}  // namespace mds::ops::cuda
