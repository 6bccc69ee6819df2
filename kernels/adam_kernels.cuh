// Device code of kernels/adam.cu (launched from there) and its launch shapes, plain CUDA with no
// runtime includes so that tests/unit/kernels_emulated_adam_test.cpp can compile it for the CPU
// under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and that test only;
// the kernels have internal linkage (see elementwise_kernels.cuh).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/device_portable.cuh"
#include "kernels/sum_of_squares.cuh"
#include "kernels/sum_of_squares_partials.h"
#include "ops/adam.h"
#include "tensor/dtype.h"

namespace mds::kernels::adam_detail {
namespace {

using detail::kWarps;

// One element's step, statement by statement as ops/cpu/adam.cpp; returns the new weight.
__device__ inline float adamw_element(float* params, const float* grads, float* exp_avg,
                                      float* exp_avg_sq, std::int64_t i,
                                      const ops::AdamWConfig& config, float bias_correction1,
                                      float bias_correction2) {
  const float beta1 = config.beta1, beta2 = config.beta2;
  const float g = grads[i];
  float m = exp_avg[i], v = exp_avg_sq[i];
  const float p = params[i];
  m = beta1 * m + (1 - beta1) * g;
  v = beta2 * v + (1 - beta2) * g * g;
  const float m_unbiased = m / bias_correction1;
  const float v_unbiased = v / bias_correction2;
  const float denom = sqrtf(v_unbiased) + config.eps;
  const float update = (m_unbiased / denom) + (config.weight_decay * p);
  const float updated = p - (config.lr * update);
  params[i] = updated;
  exp_avg[i] = m;
  exp_avg_sq[i] = v;
  return updated;
}

__global__ void adamw_kernel(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                             std::int64_t n, ops::AdamWConfig config, float bias_correction1,
                             float bias_correction2) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    adamw_element(params, grads, exp_avg, exp_avg_sq, i, config, bias_correction1,
                  bias_correction2);
  }
}

// The step, then the new weight rounded into `low` (bf16 when `bf16`, else fp16).
__global__ void adamw_cast_kernel(float* params, const float* grads, float* exp_avg,
                                  float* exp_avg_sq, std::uint16_t* low, bool bf16, std::int64_t n,
                                  ops::AdamWConfig config, float bias_correction1,
                                  float bias_correction2) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float updated = adamw_element(params, grads, exp_avg, exp_avg_sq, i, config,
                                        bias_correction1, bias_correction2);
    low[i] = bf16 ? detail::float_to_bf16_bits(updated) : detail::float_to_fp16_bits(updated);
  }
}

__global__ void partial_squares_kernel(double* partials, const float* x, std::int64_t n) {
  __shared__ double scratch[kWarps];
  const double total = detail::partial_squares(x, n, blockIdx.x, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sum_partials_kernel(double* result, const double* partials) {
  __shared__ double scratch[kWarps];
  const double total = detail::sum_partials(partials, scratch);
  if (threadIdx.x == 0) *result = total;
}

// adamw_kernel and adamw_cast_kernel: a grid-stride loop over the n elements.
inline detail::LaunchShape step_shape(std::int64_t n) {
  return detail::grid_stride_shape(n);
}

// partial_squares_kernel: one block per partial.
inline detail::LaunchShape partials_shape() {
  return {{static_cast<unsigned>(kSumOfSquaresPartials)}, {detail::kThreads}};
}

// sum_partials_kernel: one block.
inline detail::LaunchShape total_shape() {
  return {{1}, {detail::kThreads}};
}

// adamw_cast_kernel's `bf16` flag; other dtypes than bf16 and fp16 are refused by the caller.
inline bool rounds_to_bf16(tensor::DType low_dtype) {
  return low_dtype == tensor::DType::kBFloat16;
}

}  // namespace
}  // namespace mds::kernels::adam_detail
