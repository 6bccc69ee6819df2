// Device code of kernels/cross_entropy.cu (launched from there) and its launch shapes, plain CUDA
// with no runtime includes so that tests/unit/kernels_emulated_cross_entropy_test.cpp can compile
// it for the CPU under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and
// that test only; the kernels have internal linkage (see elementwise_kernels.cuh).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/device_portable.cuh"

namespace mds::kernels::cross_entropy_detail {
namespace {

using detail::block_max;
using detail::block_sum;
using detail::kThreads;
using detail::kWarps;
using detail::load;
using detail::Storage;
using detail::store;

// The logits (and dlogits) are stored as kS and widened exactly on load; max, sums, the target
// logit and the loss are fp32. The kF32 instances are the fp32 kernels statement for statement.
// Row i of the logits starts at element i·v.

template <Storage kS>
__device__ inline float row_max(const void* logits, std::int64_t first, std::int64_t v,
                                float* scratch) {
  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < v; j += kThreads) {
    const float x = load<kS>(logits, first + j);
    m = x > m ? x : m;
  }
  return block_max(m, scratch);
}

// Σ_j exp(row[j] − max), returned to every thread. An fp32 row is overwritten with the exps (the
// backward reads them); a 16-bit row is only read (rounded exps would change the gradient, so the
// backward recomputes them with the same expression).
template <Storage kS>
__device__ inline float exp_and_sum(void* logits, std::int64_t first, float max, std::int64_t v,
                                    float* scratch) {
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < v; j += kThreads) {
    const float e = expf(load<kS>(logits, first + j) - max);
    if constexpr (kS == Storage::kF32) store<kS>(logits, first + j, e);
    sum += e;
  }
  return block_sum(sum, scratch);
}

template <Storage kS>
__global__ void row_max_kernel(float* max, const void* logits, std::int64_t v) {
  __shared__ float scratch[kWarps];
  const std::int64_t i = blockIdx.x;
  const float m = row_max<kS>(logits, i * v, v, scratch);
  if (threadIdx.x == 0) max[i] = m;
}

template <Storage kS>
__global__ void target_logit_kernel(float* target_logit, const void* logits,
                                    const std::int64_t* targets, const float* max, std::int64_t n,
                                    std::int64_t v, std::int64_t vocab_start) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const std::int64_t local = targets[i] - vocab_start;
  target_logit[i] = local >= 0 && local < v ? load<kS>(logits, i * v + local) - max[i] : 0.0f;
}

template <Storage kS>
__global__ void exp_sum_kernel(float* sum_exp, void* logits, const float* max, std::int64_t v) {
  __shared__ float scratch[kWarps];
  const std::int64_t i = blockIdx.x;
  const float s = exp_and_sum<kS>(logits, i * v, max[i], v, scratch);
  if (threadIdx.x == 0) sum_exp[i] = s;
}

__global__ void loss_kernel(float* loss, const float* sum_exp, const float* target_logit,
                            std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    loss[i] = logf(sum_exp[i]) - target_logit[i];
  }
}

template <Storage kS>
__global__ void forward_kernel(float* loss, float* max, float* sum_exp, void* logits,
                               const std::int64_t* targets, std::int64_t v) {
  __shared__ float scratch[kWarps];
  const std::int64_t i = blockIdx.x;
  const float m = row_max<kS>(logits, i * v, v, scratch);
  const std::int64_t target = targets[i];
  // Every thread reads the target's logit before any thread overwrites an fp32 row with exps.
  const float target_logit =
      target >= 0 && target < v ? load<kS>(logits, i * v + target) - m : 0.0f;
  __syncthreads();
  const float s = exp_and_sum<kS>(logits, i * v, m, v, scratch);
  if (threadIdx.x == 0) {
    max[i] = m;
    sum_exp[i] = s;
    loss[i] = logf(s) - target_logit;
  }
}

// An fp32 `logits` holds the exps the forward left (max is not read, and may be null); a 16-bit
// one holds the logits, whose exps are recomputed as exp_and_sum computed them (the same fp32
// inputs, the same expf: the same bits), and the gradient is rounded once on store.
template <Storage kS>
__global__ void backward_kernel(void* dlogits, const void* logits, const std::int64_t* targets,
                                const float* max, const float* sum_exp, const float* dloss,
                                std::int64_t v, std::int64_t vocab_start) {
  const std::int64_t i = blockIdx.x;
  const float inv = 1.0f / sum_exp[i], scale = dloss[i];
  const std::int64_t local = targets[i] - vocab_start;
  float m = 0.0f;
  if constexpr (kS != Storage::kF32) m = max[i];
  // Each element is read and written by the same thread, so dlogits may alias logits.
  for (std::int64_t j = threadIdx.x; j < v; j += kThreads) {
    const float x = load<kS>(logits, i * v + j);
    float e = x;
    if constexpr (kS != Storage::kF32) e = expf(x - m);
    store<kS>(dlogits, i * v + j, j == local ? (e * inv - 1.0f) * scale : e * inv * scale);
  }
}

// row_max_kernel, exp_sum_kernel, forward_kernel, backward_kernel: one block per row.
inline detail::LaunchShape row_shape(std::int64_t n) {
  return detail::row_shape(n, "kernels::cross_entropy");
}

// target_logit_kernel: one thread per row.
inline detail::LaunchShape target_logit_shape(std::int64_t n) {
  return detail::thread_per_element_shape(n);
}

// loss_kernel: a grid-stride loop over the rows.
inline detail::LaunchShape loss_shape(std::int64_t n) {
  return detail::grid_stride_shape(n);
}

}  // namespace
}  // namespace mds::kernels::cross_entropy_detail
