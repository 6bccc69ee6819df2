// fc1's bias and GeLU carried by cuBLASLt's GEMM epilogue instead of their own kernel
// (kernels/gelu.h): the GEMM adds the bias, applies the GeLU and keeps its input (GELU_AUX_BIAS)
// for the backward, which the GeLU kernels take with no bias (kernels::bias_gelu_backward). 16-bit
// activations only (bf16, fp16: the epilogue's aux is C's type), with cuBLASLt's tanh GeLU, which
// matches ops::GeluKind::kTanhOpenAI to ~1e-3 relative (tests/gpu/gemm_test.cpp), not bit for bit.
// The backward's own epilogues (DGELU_BGRAD, BGRADB) were measured slower than the kernels on an
// H100 and are not used (docs/performance.md, session 17). Device pointers, work queued on
// `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/gemm.h"
#include "tensor/dtype.h"

namespace mds::kernels {

// out[m, n] = gelu(x[m, k]·weight[n, k]ᵀ + bias[n]) and pre_activation[m, n] = x·weightᵀ + bias,
// each rounded once to `dtype`; bias has the activations' dtype; n a multiple of 8.
void linear_bias_gelu_forward(GemmContext& context, void* out, void* pre_activation, const void* x,
                              const void* weight, const void* bias, tensor::DType dtype,
                              std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t stream);

}  // namespace mds::kernels
