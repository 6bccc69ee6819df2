// Host side of the tensor-core flash attention (attention_tc_kernels.cuh), called by
// kernels/attention.cu's dispatch with the geometry and scaling it has already checked: bf16 or
// fp16 activations (`bf16` picks which), head dim 64 or 128, 16-byte aligned pointers.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/attention_kernels.cuh"
#include "kernels/scratch.h"

namespace mds::kernels::attention_tc {

bool head_dim_supported(std::int64_t hn);

// The launches: grid x the b·np slices, grid y the tiles of 64 rows.
void forward(void* ctx, float* lse, const void* qkv, bool bf16, std::int64_t hn,
             const attention_detail::Geometry& g, std::int64_t slices, float alpha, float coeff,
             cudaStream_t stream);
// dqkv += the gradient, or dqkv = it when !accumulate (every element written, none read). With
// dq_from_stored_ds, dq comes from the dSᵀ the dk/dv kernel stores where that takes at most 2 GiB;
// otherwise the dq kernel computes dS again. Row deltas and dSᵀ live in `scratch` (a
// stream-ordered allocation when null).
void backward(void* dqkv, const void* dctx, const void* ctx, const float* lse, const void* qkv,
              bool bf16, std::int64_t hn, const attention_detail::Geometry& g, std::int64_t slices,
              float alpha, float coeff, bool accumulate, bool dq_from_stored_ds,
              cudaStream_t stream, Scratch* scratch);

}  // namespace mds::kernels::attention_tc
