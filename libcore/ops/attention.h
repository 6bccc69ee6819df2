// Causal self-attention core of ParallelAttention (training.md §1.4), for the heads of one TP rank,
// between the fused QKV projection and the output projection.
//
// Layouts (s sequence, b micro-batch, np heads on this rank, hn head dim):
//   qkv   [s, b, np·3·hn]  the QKV GEMM output as upstream views it, [s, b, np, 3·hn]: per token
//                          the heads follow each other and each head holds q, then k, then v
//                          (feature (head·3 + t)·hn + d, t = 0 q, 1 k, 2 v; checkpoint
//                          version 3.0).
//   probs [b, np, s, s]    softmax probabilities, row = query, column = key; zero above the
//                          diagonal. Caller-owned: the forward writes it, the backward reads it.
//   ctx   [s, b, np·hn]    context, head-major within a token, ready for the dense projection.
//
// Scores are S = α·q·kᵀ with α = 1/(sqrt(hn)·coeff), then the softmax takes coeff·S in fp32 with
// the causal mask. coeff = 1 is plain 1/sqrt(hn) scaling; `--apply-query-key-layer-scaling` uses
// coeff = max(1, layer_number) (see query_key_layer_scaling_coeff), the same math up to rounding.
//
// Attention dropout sits between the two halves, as upstream: probs_forward → dropout into a
// second [b, np, s, s] tensor → context_forward(dropped probs); backward in reverse order with the
// dropout backward applied to dprobs in place.
//
// Two implementations: on the host the halves below keep the probabilities (host tensors only);
// on a CUDA device flash_attention_forward/backward at the end never store them. Inference with a
// key/value cache uses the decode attention at the end of this file, on the host or a device.
//
// Dtypes: qkv, ctx, dctx and dqkv (and the decode attention's cache and context) are float32,
// bfloat16 or float16, one dtype per call (ops/activation_dtype.h); probs, dprobs, dropped and lse
// are float32. A 16-bit call computes in fp32: on the host the fp32 function runs on widened
// copies and each output is rounded once (ops/cpu/widened.h); on a device the flash kernels widen
// their loads and round each store once.
#pragma once
#include <cstdint>

#include "ops/device_context.h"
#include "ops/dropout.h"
#include "ops/dx_mode.h"
#include "tensor/tensor.h"

namespace mds::ops {

// The coefficient upstream multiplies into norm_factor: max(1, layer_number) with layer scaling
// (GPTModelPipe numbers layers from 0, the native GPTModel from 1; pass the number the model uses),
// 1 without.
float query_key_layer_scaling_coeff(int layer_number, bool apply_query_key_layer_scaling);

// probs = causal_softmax(coeff · α · q·kᵀ), written for every (batch, head). With `key_bias`
// (fp32 [np, s], host), head h's scores first get key_bias[h, j]/coeff added for key j, as
// upstream's ALiBi baddbmm (training.md §1.4 step 5): S = β·B + α·q·kᵀ, β = 1/coeff.
void attention_probs_forward(tensor::Tensor probs, tensor::Tensor qkv, float coeff,
                             tensor::Tensor key_bias = {});
// ctx = probs · v (overwrites ctx).
void attention_context_forward(tensor::Tensor ctx, tensor::Tensor probs, tensor::Tensor qkv);

// dprobs = dctx · vᵀ on and below the diagonal (a [b, np, s, s] workspace; what it holds above
// the diagonal is unspecified, attention_probs_backward never reads it) and the v part of dqkv +=
// probsᵀ·dctx.
void attention_context_backward(tensor::Tensor dprobs, tensor::Tensor dqkv, tensor::Tensor dctx,
                                tensor::Tensor probs, tensor::Tensor qkv);
// The q and k parts of dqkv += softmax and score backward of dprobs. dprobs is consumed: it is
// overwritten with the gradient of the scores.
void attention_probs_backward(tensor::Tensor dqkv, tensor::Tensor dprobs, tensor::Tensor probs,
                              tensor::Tensor qkv, float coeff);

// Which of a layer's heads a probs tensor holds: heads [first, first + np) of `total` (0: the
// tensor's own np). With a head split across TP ranks, slice (batch, head) draws the attention
// dropout mask of slice (batch, first + head) of the unsplit [b, total, s, s], so the masks (and
// the training run) do not depend on T.
struct HeadRange {
  std::int64_t first = 0;
  std::int64_t total = 0;
};

// With attention dropout, fused so that each (batch, head) slice draws its mask once per pass and
// only on and below the diagonal. Same results, bit for bit, as the composition in brackets (for
// the whole head range), where dropout(x) keeps element e of the [b, np, s, s] tensor as
// attention_dropout_keep(stream, e) decides (16 bits a draw, unlike dropout_forward's masks) and
// multiplies it by 1/(1 − p).
// ctx = dropout(probs) · v; dropped ([b, np, s, s]) receives dropout(probs).
//   [dropped = dropout(probs); attention_context_forward(ctx, dropped, qkv)]
void attention_context_forward_with_dropout(tensor::Tensor ctx, tensor::Tensor dropped,
                                            tensor::Tensor probs, tensor::Tensor qkv,
                                            const DropoutStream& stream, HeadRange heads = {});
// dprobs = (dctx · vᵀ) ⊙ mask/(1 − p), zero above the diagonal, and the v part of dqkv +=
// dropout(probs)ᵀ · dctx; dropped is a [b, np, s, s] workspace (it ends up holding dropout(probs)).
//   [dropped = dropout(probs); attention_context_backward(dprobs, dqkv, dctx, dropped, qkv);
//    dprobs = dropout(dprobs)]
void attention_context_backward_with_dropout(tensor::Tensor dprobs, tensor::Tensor dqkv,
                                             tensor::Tensor dropped, tensor::Tensor dctx,
                                             tensor::Tensor probs, tensor::Tensor qkv,
                                             const DropoutStream& stream, HeadRange heads = {});

// Both halves without dropout.
void attention_forward(tensor::Tensor ctx, tensor::Tensor probs, tensor::Tensor qkv, float coeff);
// dqkv += ∂L/∂qkv; dprobs is a [b, np, s, s] workspace.
void attention_backward(tensor::Tensor dqkv, tensor::Tensor dprobs, tensor::Tensor dctx,
                        tensor::Tensor probs, tensor::Tensor qkv, float coeff);

// ---- Flash-style attention (CUDA tensors only) ------------------------------------------------
// The same attention without the [b, np, s, s] probabilities (kernels/attention.h): the forward
// walks the keys in tiles with an online softmax and keeps per query row
//   lse [b, np, s] = log Σ_{j ≤ i} exp(coeff·S_ij)   (fp32, row i of slice (batch, head))
// for the backward, which recomputes the probabilities from it. With dropout (p > 0) each
// probability is dropped with the mask of attention_context_forward_with_dropout for the same
// stream and heads (bit-identical masks), drawn inside the kernels. On the host these fail: the
// host keeps the halves above.

// Whether the CUDA kernels exist for head dim hn (false in a build without CUDA).
bool flash_attention_supports(std::int64_t hn);
// The dropout's keep bits, which the forward can leave for the backward so that it reads a bit
// per pair instead of drawing the Philox stream again (kernels/attention.h): int32 words
// [b, np, s, 2·⌈s/64⌉]. Worth their memory (s/8 bytes per query row) where the backward reads
// them: on a CUDA build with bf16/fp16 activations at head dim 64 or 128 (the tensor-core
// kernels).
tensor::Shape flash_attention_keep_bits_shape(std::int64_t b, std::int64_t np, std::int64_t s);
bool flash_attention_reads_keep_bits(tensor::DType dtype, std::int64_t hn);
// context = dropout(softmax(coeff·α·q·kᵀ))·v (written), lse written; with dropout and a given
// keep_bits, the keep bits too. key_bias (ALiBi: fp32 [np, s] on the device, or empty) as
// attention_probs_forward's, in both passes (pass the same one to the backward); with it the
// SIMT kernels run (the tensor-core kernels take no bias).
void flash_attention_forward(const DeviceContext& ctx, tensor::Tensor context, tensor::Tensor lse,
                             tensor::Tensor qkv, float coeff, const DropoutStream& dropout = {},
                             HeadRange heads = {}, tensor::Tensor keep_bits = {},
                             tensor::Tensor key_bias = {});
// dqkv += ∂L/∂qkv (dqkv = … with Dx::kOverwrite) from dcontext and the forward's context and
// lse (same coeff, dropout, heads; keep_bits as the forward wrote them, or not given). dqkv must
// not alias the inputs.
void flash_attention_backward(const DeviceContext& ctx, tensor::Tensor dqkv,
                              tensor::Tensor dcontext, tensor::Tensor context, tensor::Tensor lse,
                              tensor::Tensor qkv, float coeff, const DropoutStream& dropout = {},
                              HeadRange heads = {}, Dx dx_mode = Dx::kAccumulate,
                              tensor::Tensor keep_bits = {}, tensor::Tensor key_bias = {});

// ---- Decode attention: new positions over a key/value cache (inference) ----------------------
// Layouts (b rows, count new positions per row, np heads, hn head dim, capacity cached positions
// per row):
//   qkv           [b, count, np·3·hn]  the new positions' fused QKV, row after row (batch-major,
//                                      unlike training's [s, b, …]); per token as above
//   keys, values  [b, np, capacity, hn] one layer's cache
//   context       [b, count, np·hn]
// New position i of a row is absolute position past + i. Same scaling and softmax as above (fp32,
// coeff·α·q·kᵀ over keys j ≤ past + i); no dropout. On the host a plain loop; on a CUDA device
// kernels/decode_attention.h (head dims 8, 16, 32, 64, 96, 128, as the flash kernels).

// keys and values at positions [past, past + count) ← the k and v parts of qkv (bit for bit).
void kv_cache_append(const DeviceContext& ctx, tensor::Tensor keys, tensor::Tensor values,
                     tensor::Tensor qkv, std::int64_t past);
// context = softmax(coeff·α·q·kᵀ)·v of each new position over cache positions [0, past + i]
// (written); their keys and values must be in the cache already (kv_cache_append).
// With `key_bias` (fp32 [np, K] on the context's device, K ≥ past + count) the scores take it as
// attention_probs_forward's do (ALiBi).
void decode_attention_forward(const DeviceContext& ctx, tensor::Tensor context, tensor::Tensor qkv,
                              tensor::Tensor keys, tensor::Tensor values, std::int64_t past,
                              float coeff, tensor::Tensor key_bias = {});
// Whether decode_attention_forward runs on a CUDA device for head dim hn (false without CUDA).
bool decode_attention_supports_cuda(std::int64_t hn);

}  // namespace mds::ops
