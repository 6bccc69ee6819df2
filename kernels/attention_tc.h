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
// fragments each serve two mma; two blocks an SM instead of four). draw false: where the keep bits
// are drawn first (draws_keep_bits_first), they were already drawn for this call (draw_keep_bits),
// so that trials of the forward kernel time it alone.
struct ForwardChoices {
  bool two_atoms_a_warp = false;
  bool draw = true;
};

// Whether the forward draws the keep bits by their own kernel before it (with dropout, keep bits
// to store, s % 8 == 0 and a grid that fits) and reads them, rather than drawing inside.
bool draws_keep_bits_first(const attention_detail::Geometry& g, std::int64_t slices);
// That kernel alone.
void draw_keep_bits(const attention_detail::Geometry& g, std::int64_t slices, cudaStream_t stream);

// The launches: grid x the b·np slices, grid y the tiles of 64 rows (128 for the forward with two
// atoms a warp).
void forward(void* ctx, float* lse, const void* qkv, bool bf16, std::int64_t hn,
             const attention_detail::Geometry& g, std::int64_t slices, float alpha, float coeff,
             ForwardChoices choices, cudaStream_t stream);
// How the backward runs (the same results up to the bits noted): dq_from_stored_ds, dq from
// the dSᵀ the dk/dv kernel stores where that takes at most 2 GiB (otherwise, or when false, the
// dq kernel computes dS again); at hn = 64 two shapes under trial, each giving the same bits:
// dkdv_short_steps, the dk/dv kernel stepping over 32 query rows instead of 64 (three blocks an
// SM instead of two), and dq_two_atoms, dq from dSᵀ with two m16 atoms a warp (blocks of 128
// query rows).
struct BackwardChoices {
  bool dq_from_stored_ds = true;
  bool dkdv_short_steps = false;
  bool dq_two_atoms = false;
};

// dqkv += the gradient, or dqkv = it when !accumulate (every element written, none read). Row
// deltas and dSᵀ live in `scratch` (a stream-ordered allocation when null).
void backward(void* dqkv, const void* dctx, const void* ctx, const float* lse, const void* qkv,
              bool bf16, std::int64_t hn, const attention_detail::Geometry& g, std::int64_t slices,
              float alpha, float coeff, bool accumulate, BackwardChoices choices,
              cudaStream_t stream, Scratch* scratch);

}  // namespace mds::kernels::attention_tc
