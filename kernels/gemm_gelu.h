// The MLP's bias and GeLU carried by cuBLASLt's GEMM epilogues instead of their own kernels
// (kernels/gelu.h): fc1's GEMM adds the bias, applies the GeLU and keeps its input
// (GELU_AUX_BIAS); in the backward, the GEMM that gives the GeLU output's gradient (fc2's dgrad)
// multiplies it by the GeLU's derivative at that input and sums fc1's bias gradient
// (DGELU_BGRAD). 16-bit activations only (bf16, fp16: the epilogues' aux is C's type), with
// cuBLASLt's tanh GeLU, which matches ops::GeluKind::kTanhOpenAI to ~1e-3 relative
// (tests/gpu/gemm_test.cpp), not bit for bit; the ops that call these keep the kernels for the
// other cases. Device pointers, work queued on `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/gemm.h"
#include "kernels/scratch.h"
#include "tensor/dtype.h"

namespace mds::kernels {

// out[m, n] = gelu(x[m, k]·weight[n, k]ᵀ + bias[n]) and pre_activation[m, n] = x·weightᵀ + bias,
// each rounded once to `dtype`; bias has the activations' dtype; n a multiple of 8.
void linear_bias_gelu_forward(GemmContext& context, void* out, void* pre_activation, const void* x,
                              const void* weight, const void* bias, tensor::DType dtype,
                              std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t stream);

// The backward of the GEMM after it, out = gelu_out·weightᵀ with weight [n, k], through the GeLU:
// dpre[m, k] = (dout[m, n]·weight[n, k]) · gelu'(pre_activation[m, k]), written whole in
// `dtype`; dbias[k] (fp32) += Σ_rows dpre as cuBLASLt sums it, rounded to `dtype` (what a
// 16-bit bias's gradient holds upstream); k a multiple of 8. `scratch` (this stream's, or null:
// allocated for the call) lends the 16-bit sums.
void linear_dgelu_backward(GemmContext& context, void* dpre, float* dbias, const void* dout,
                           const void* weight, const void* pre_activation, tensor::DType dtype,
                           std::int64_t m, std::int64_t n, std::int64_t k, Scratch* scratch,
                           cudaStream_t stream);

}  // namespace mds::kernels
