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

// How the forward runs (the same bits either way): two_atoms_a_warp, at hn = 64, blocks of 128
// query rows with each warp owning two m16 atoms of them instead of blocks of 64 (the k and v
// fragments each serve two mma; two blocks an SM instead of four).
struct ForwardChoices {
  bool two_atoms_a_warp = false;
};

// The launches: grid x the b·np slices, grid y the tiles of 64 rows (128 for the forward with two
// atoms a warp).
void forward(void* ctx, float* lse, const void* qkv, bool bf16, std::int64_t hn,
             const attention_detail::Geometry& g, std::int64_t slices, float alpha, float coeff,
             ForwardChoices choices, cudaStream_t stream);
// How the backward runs (the same results up to the bits noted): dq_from_stored_ds, dq from
// the dSᵀ the dk/dv kernel stores where that takes at most 2 GiB (otherwise, or when false, the
// dq kernel computes dS again); trial_shapes, at hn = 64, the dk/dv kernel stepping over 32 query
// rows instead of 64 (three blocks an SM instead of two) and dq from dSᵀ with two m16 atoms a
// warp (blocks of 128 query rows): the same bits.
struct BackwardChoices {
  bool dq_from_stored_ds = true;
  bool trial_shapes = false;
};

// dqkv += the gradient, or dqkv = it when !accumulate (every element written, none read). Row
// deltas and dSᵀ live in `scratch` (a stream-ordered allocation when null).
void backward(void* dqkv, const void* dctx, const void* ctx, const float* lse, const void* qkv,
              bool bf16, std::int64_t hn, const attention_detail::Geometry& g, std::int64_t slices,
              float alpha, float coeff, bool accumulate, BackwardChoices choices,
              cudaStream_t stream, Scratch* scratch);

}  // namespace mds::kernels::attention_tc
