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

__device__ inline float row_max(const float* row, std::int64_t v, float* scratch) {
  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < v; j += kThreads) m = row[j] > m ? row[j] : m;
  return block_max(m, scratch);
}

// row[j] ← exp(row[j] − max); returns the sum to every thread.
__device__ inline float exp_and_sum(float* row, float max, std::int64_t v, float* scratch) {
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < v; j += kThreads) {
    const float e = expf(row[j] - max);
    row[j] = e;
    sum += e;
  }
  return block_sum(sum, scratch);
}

__global__ void row_max_kernel(float* max, const float* logits, std::int64_t v) {
  __shared__ float scratch[kWarps];
  const std::int64_t i = blockIdx.x;
  const float m = row_max(logits + i * v, v, scratch);
  if (threadIdx.x == 0) max[i] = m;
}

__global__ void target_logit_kernel(float* target_logit, const float* logits,
                                    const std::int64_t* targets, const float* max, std::int64_t n,
                                    std::int64_t v, std::int64_t vocab_start) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const std::int64_t local = targets[i] - vocab_start;
  target_logit[i] = local >= 0 && local < v ? logits[i * v + local] - max[i] : 0.0f;
}

__global__ void exp_sum_kernel(float* sum_exp, float* logits, const float* max, std::int64_t v) {
  __shared__ float scratch[kWarps];
  const std::int64_t i = blockIdx.x;
  const float s = exp_and_sum(logits + i * v, max[i], v, scratch);
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

__global__ void forward_kernel(float* loss, float* max, float* sum_exp, float* logits,
                               const std::int64_t* targets, std::int64_t v) {
  __shared__ float scratch[kWarps];
  const std::int64_t i = blockIdx.x;
  float* row = logits + i * v;
  const float m = row_max(row, v, scratch);
  const std::int64_t target = targets[i];
  // Every thread reads the target's logit before any thread overwrites the row with exps.
  const float target_logit = target >= 0 && target < v ? row[target] - m : 0.0f;
  __syncthreads();
  const float s = exp_and_sum(row, m, v, scratch);
  if (threadIdx.x == 0) {
    max[i] = m;
    sum_exp[i] = s;
    loss[i] = logf(s) - target_logit;
  }
}

__global__ void backward_kernel(float* dlogits, const float* exp_logits,
                                const std::int64_t* targets, const float* sum_exp,
                                const float* dloss, std::int64_t v, std::int64_t vocab_start) {
  const std::int64_t i = blockIdx.x;
  const float* row = exp_logits + i * v;
  float* grad = dlogits + i * v;
  const float inv = 1.0f / sum_exp[i], scale = dloss[i];
  const std::int64_t local = targets[i] - vocab_start;
  // Each element is read and written by the same thread, so dlogits may alias exp_logits.
  for (std::int64_t j = threadIdx.x; j < v; j += kThreads) {
    grad[j] = j == local ? (row[j] * inv - 1.0f) * scale : row[j] * inv * scale;
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
