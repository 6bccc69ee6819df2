// Causal self-attention in the style of FlashAttention-2, the CUDA twin of the composition of
// ops/cpu/attention.h's halves (attention_probs_forward + attention_context_forward, and their
// backwards), with the attention dropout between them drawn inside (the masks of
// attention_context_forward_with_dropout). Same layouts as the CPU (ops/attention.h):
//   qkv [s, b, np·3·hn]: per token the heads in order, each holding q, then k, then v;
//   ctx [s, b, np·hn];  lse [b, np, s] (per query row, this op's own).
// The same scaling: scores S = α·q·kᵀ with α = 1/(sqrt(hn)·coeff) (rounded from double, as the
// CPU's), the softmax of coeff·S in fp32 over keys j ≤ i.
//
// No [s, s] matrix is stored: the forward walks the keys tile by tile with an online softmax and
// keeps, per query row, lse = m + log(Σ exp(z − m)) in the coeff·S domain; the backward recomputes
// the probabilities exp(z − lse) from it. The math is fp32 with fp32 accumulation; the
// activations qkv, ctx, dctx and dqkv are fp32, bf16 or fp16 (`dtype`, one for all of them: loads
// widened exactly, each store rounded once, `dqkv +=` widened, added in fp32 and rounded once),
// lse is always fp32. Fully
// deterministic: no atomics; dk/dv and dq come from two kernels each owning its outputs (the key
// tile's rows, the query tile's rows), summing in a fixed order.
//
// Device pointers, work queued on `stream`. Head dims with a compiled kernel: 8, 16, 32, 64, 96,
// 128; others fail.
//
// Two kernel families compute it. The SIMT kernels (attention_kernels.cuh) take every dtype and
// head dim, with fp32 CUDA-core math on the widened values. The tensor-core kernels
// (attention_tc_kernels.cuh) take bf16/fp16 at head dims 64 and 128: every product is an mma with
// 16-bit operands and fp32 accumulation, so the probabilities (forward, dv) and the score
// gradients (dq, dk) are rounded to the 16-bit type before their products, as in
// FlashAttention-2 (docs/cuda.md bounds the difference). The lse of either forward serves either
// backward.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/scratch.h"
#include "ops/cpu/attention.h"
#include "ops/dropout.h"
#include "ops/launch_variants.h"
#include "tensor/dtype.h"

namespace mds::kernels {

bool attention_head_dim_supported(std::int64_t hn);

// kAuto: the tensor-core kernels wherever they apply (bf16/fp16, hn 64 or 128, every pointer
// 16-byte aligned), the SIMT kernels elsewhere. kSimt forces the SIMT kernels (tests, benchmarks);
// kTensorCore forces the tensor-core ones and fails with one line where they do not apply;
// kTensorCoreRecomputingDq likewise, with the backward's dq kernel computing dS again instead of
// reading the dSᵀ the dk/dv kernel stored, as it does anyway where dSᵀ would pass 2 GiB (tests);
// kTensorCoreTrialShapes likewise, with the launch shapes under trial against the default ones
// at head dim 64 (gpu_bench times both; the same bits): forward and dq blocks of 128 query rows,
// each warp owning two m16 atoms of them (the forward at two blocks an SM instead of four), and
// the dk/dv kernel stepping over 32 query rows instead of 64 (three blocks an SM instead of two).
//
// With `variants` (kAuto only), the tensor-core calls at head dim 64 take the shapes picked
// there for their problem (ops/launch_variants.h): the first call of a problem times the default
// and trial shapes of each kernel on its own operands (outputs written by the trials, then by
// the call itself; the backward's trials write a scratch dqkv) and keeps the fastest whose bits
// are the default's. So the results are the default shapes' whatever the timings say.
enum class AttentionKernel {
  kAuto,
  kSimt,
  kTensorCore,
  kTensorCoreRecomputingDq,
  kTensorCoreTrialShapes
};

// Whether the tensor-core kernels take this dtype and head dim (pointers must also be 16-byte
// aligned).
bool attention_tensor_core_supported(tensor::DType dtype, std::int64_t hn);

// The keep bits of the attention dropout, [b·np·s][attention_keep_words(s)] 32-bit words: bit
// j % 32 of word (slice·s + i)·words + j / 32 is set where pair (i, j ≤ i) is kept (other bits
// unspecified). The forward writes them (with p > 0 and a non-null pointer) and the tensor-core
// backward reads them instead of drawing the Philox stream again; the SIMT backward draws anyway.
// 8-byte aligned.
std::int64_t attention_keep_words(std::int64_t s);

// ctx = dropout(causal_softmax(coeff·α·q·kᵀ))·v (written), lse [b·np·s] written. With
// dropout.p > 0 pair (i, j) of slice (batch, head) keeps the mask the CPU draws for it: element
// (sh·s + i)·s + j of the stream, sh = batch·d.stream_heads + d.first_head + head (stream_heads 0
// means np), and keep_bits (optional) are written. p = 0: no dropout (d.first_head,
// d.stream_heads and keep_bits unused). key_bias (ALiBi, device fp32 [np, s], or null) adds
// key_bias[head, j]/coeff to each score as ops::attention_probs_forward does, in every kernel
// family; the backward must be given the same.
void attention_forward(void* ctx, float* lse, const void* qkv, tensor::DType dtype,
                       ops::cpu::AttentionDims d, float coeff, const ops::DropoutStream& dropout,
                       cudaStream_t stream, AttentionKernel kernel = AttentionKernel::kAuto,
                       std::uint32_t* keep_bits = nullptr,
                       ops::LaunchVariantChoices* variants = nullptr,
                       const float* key_bias = nullptr);

// dqkv += ∂L/∂qkv (q, k and v parts) given dctx and the forward's ctx and lse (and the same
// dropout, with keep_bits as the forward wrote them or null). Each element of dqkv is read and
// written by one thread once. dqkv must not alias the inputs. With accumulate false,
// dqkv = ∂L/∂qkv: the tensor-core kernels write every element without reading it; the SIMT
// kernels add onto a zero fill. The tensor-core kernels' row deltas and stored dSᵀ go in
// `scratch` (or a stream-ordered allocation when null).
void attention_backward(void* dqkv, const void* dctx, const void* ctx, const float* lse,
                        const void* qkv, tensor::DType dtype, ops::cpu::AttentionDims d,
                        float coeff, const ops::DropoutStream& dropout, cudaStream_t stream,
                        AttentionKernel kernel = AttentionKernel::kAuto, bool accumulate = true,
                        const std::uint32_t* keep_bits = nullptr, Scratch* scratch = nullptr,
                        ops::LaunchVariantChoices* variants = nullptr,
                        const float* key_bias = nullptr);

// The fp32 instances, for callers holding float pointers.
void attention_forward(float* ctx, float* lse, const float* qkv, ops::cpu::AttentionDims d,
                       float coeff, const ops::DropoutStream& dropout, cudaStream_t stream);
void attention_backward(float* dqkv, const float* dctx, const float* ctx, const float* lse,
                        const float* qkv, ops::cpu::AttentionDims d, float coeff,
                        const ops::DropoutStream& dropout, cudaStream_t stream);

}  // namespace mds::kernels
