// Linear layers and batched matrix products (OpenBLAS on CPU, cuBLASLt on CUDA).
//
// Dtypes: x, weight, bias, out, dout and dx (a, b and out of a batched product) are all float32,
// all bfloat16 or all float16; the bias has the weight's dtype, as upstream Megatron keeps every
// parameter in the 16-bit type under --bf16/--fp16. dweight and dbias are always float32: they are
// the optimizer's fp32 micro-batch gradient accumulators. A 16-bit call computes in fp32 and rounds
// each 16-bit output once: on the host the inputs (and the dx it adds into) are widened, the fp32
// product runs, and the result is rounded (ops/cpu/widened.h); on a device cuBLASLt reads the
// 16-bit operands, accumulates in fp32 and rounds alpha·AB + beta·C (+ bias) once, so the two
// differ only by the fp32 summation order.
//
// Gradient convention of all ops: a backward adds into every gradient it produces (`+=`), as
// llm.c does, because parameter gradients sum over micro-batches and the residual stream sums the
// gradients of two branches; a caller wanting a fresh gradient fills it with zero first. Ops that
// deviate (dropout, cross entropy, attention workspaces) say so.
//
// Each op takes the DeviceContext it runs with (ops/device_context.h; on CUDA fp32 products go
// through cuBLASLt in full fp32, no TF32) and has an overload without one for host tensors.
#pragma once

#include "ops/device_context.h"
#include "ops/dx_mode.h"
#include "tensor/tensor.h"

namespace mds::ops {

// Megatron/PyTorch linear: out[..., N] = x[..., K] · weight[N, K]ᵀ (+ bias[N]). The weight is
// [out_features, in_features]; `bias` may be left as tensor::Tensor{} (no bias, or a bias that
// Megatron returns separately to be added after a TP reduction).
void linear_forward(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor x,
                    tensor::Tensor weight, tensor::Tensor bias = {});

// dx[..., K] += dout[..., N] · weight[N, K] (= with dx_mode Dx::kOverwrite);
// dweight[N, K] += doutᵀ · x (= with dweight_mode Dx::kOverwrite); dbias[N] += Σ_rows dout. Any of
// dx, dweight, dbias may be tensor::Tensor{} to skip that product.
void linear_backward(const DeviceContext& ctx, tensor::Tensor dx, tensor::Tensor dweight,
                     tensor::Tensor dbias, tensor::Tensor dout, tensor::Tensor x,
                     tensor::Tensor weight, Dx dx_mode = Dx::kAccumulate,
                     Dx dweight_mode = Dx::kAccumulate);

// out[B, M, N] = alpha · op(a)[B, M, K] · op(b)[B, K, N] + beta · out, where op transposes the
// last two dims when asked (a stored [B, K, M] if transpose_a, b stored [B, N, K] if transpose_b).
void batched_matmul(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor a,
                    tensor::Tensor b, bool transpose_a, bool transpose_b, float alpha = 1.0f,
                    float beta = 0.0f);

// The same on host tensors.
void linear_forward(tensor::Tensor out, tensor::Tensor x, tensor::Tensor weight,
                    tensor::Tensor bias = {});
void linear_backward(tensor::Tensor dx, tensor::Tensor dweight, tensor::Tensor dbias,
                     tensor::Tensor dout, tensor::Tensor x, tensor::Tensor weight,
                     Dx dx_mode = Dx::kAccumulate, Dx dweight_mode = Dx::kAccumulate);
void batched_matmul(tensor::Tensor out, tensor::Tensor a, tensor::Tensor b, bool transpose_a,
                    bool transpose_b, float alpha = 1.0f, float beta = 0.0f);

}  // namespace mds::ops
