// Device code of kernels/cross_entropy.cu (launched from there) and its launch shapes, plain CUDA
// with no runtime includes so that tests/unit/kernels_emulated_cross_entropy_test.cpp can compile
// it for the CPU under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and
// that test only; the kernels have internal linkage (see elementwise_kernels.cuh).
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "kernels/device_portable.cuh"

namespace mds::kernels::cross_entropy_detail {
namespace {

using detail::block_max;
using detail::block_sum;
using detail::kThreads;
using detail::kWarps;
using detail::load;
using detail::load8;
using detail::Storage;
using detail::store;
using detail::store8;

// The logits (and dlogits) are stored as kS and widened exactly on load; max, sums, the target
// logit and the loss are fp32. The kF32 instances are the fp32 kernels statement for statement.
// Row i of the logits starts at element i·v.

// kBy8: a thread takes the row's elements eight at a time (16-byte accesses; rows of a multiple
// of 8 elements, 16-byte aligned), chunks threadIdx.x, + kThreads, …; otherwise one at a time,
// elements threadIdx.x, + kThreads, …. Either way a fixed order, so the results are deterministic;
// the two orders give the same max and elementwise values, and sums that differ by rounding.
template <Storage kS, bool kBy8, typename Visit>
__device__ inline void for_row_elements(const void* row_base, std::int64_t first, std::int64_t v,
                                        Visit visit) {
  if constexpr (kBy8) {
    for (std::int64_t k = threadIdx.x; k < v / 8; k += kThreads) {
      float x[8];
      load8<kS>(row_base, first + 8 * k, x);
      visit(8 * k, x);
    }
  } else {
    for (std::int64_t j = threadIdx.x; j < v; j += kThreads) {
      float x[1] = {load<kS>(row_base, first + j)};
      visit(j, x);
    }
  }
}

// Elements per visit of for_row_elements.
template <bool kBy8>
constexpr int kRowStep = kBy8 ? 8 : 1;

template <Storage kS, bool kBy8>
__device__ inline float row_max(const void* logits, std::int64_t first, std::int64_t v,
                                float* scratch) {
  float m = -INFINITY;
  for_row_elements<kS, kBy8>(logits, first, v, [&](std::int64_t, const float* x) {
    for (int k = 0; k < kRowStep<kBy8>; ++k) m = x[k] > m ? x[k] : m;
  });
  return block_max(m, scratch);
}

// Σ_j exp(row[j] − max), returned to every thread. An fp32 row is overwritten with the exps (the
// backward reads them); a 16-bit row is only read (rounded exps would change the gradient, so the
// backward recomputes them with the same expression).
template <Storage kS, bool kBy8>
__device__ inline float exp_and_sum(void* logits, std::int64_t first, float max, std::int64_t v,
                                    float* scratch) {
  float sum = 0.0f;
  for_row_elements<kS, kBy8>(logits, first, v, [&](std::int64_t j, const float* x) {
    float e[kRowStep<kBy8>];
    for (int k = 0; k < kRowStep<kBy8>; ++k) {
      e[k] = expf(x[k] - max);
      sum += e[k];
    }
    if constexpr (kS == Storage::kF32) {
      if constexpr (kBy8) {
        store8<kS>(logits, first + j, e);
      } else {
        store<kS>(logits, first + j, e[0]);
      }
    }
  });
  return block_sum(sum, scratch);
}

// A row's max and Σ exp(x − max) in one pass (online softmax), for 16-bit rows, which the forward
// does not overwrite: each thread keeps a running max and a sum rescaled whenever that max grows,
// and the threads' pairs are merged in a fixed order (a butterfly in each warp, then the warps in
// order), so the results are deterministic. The max is row_max's exactly; the sum differs from
// exp_and_sum's by rounding. -inf logits add 0 (their exps under any finite max), and a row whose
// max is -inf gets a NaN sum, as exp_and_sum gives it. A row is read once instead of twice.
struct MaxSum {
  float max, sum;
};

// Commutative bit for bit (a + b == b + a), so both lanes of a butterfly get the same pair. A sum
// whose max is the merged one keeps its scale, also where that max is infinite (no inf − inf).
__device__ inline MaxSum merge(MaxSum a, MaxSum b) {
  const float m = b.max > a.max ? b.max : a.max;
  const auto rescaled = [m](MaxSum x) { return x.max == m ? x.sum : x.sum * expf(x.max - m); };
  return {m, rescaled(a) + rescaled(b)};
}

template <Storage kS, bool kBy8>
__device__ inline MaxSum row_max_and_sum(const void* logits, std::int64_t first, std::int64_t v,
                                         MaxSum* scratch) {
  MaxSum mine{-INFINITY, 0.0f};
  for_row_elements<kS, kBy8>(logits, first, v, [&](std::int64_t, const float* x) {
    float m = mine.max;
    for (int k = 0; k < kRowStep<kBy8>; ++k) m = x[k] > m ? x[k] : m;
    if (m != mine.max) mine.sum *= expf(mine.max - m);  // the first finite max: 0 · 0
    for (int k = 0; k < kRowStep<kBy8>; ++k) mine.sum += x[k] == -INFINITY ? 0.0f : expf(x[k] - m);
    mine.max = m;
  });
  for (int delta = 16; delta > 0; delta /= 2) {
    mine = merge(mine, {__shfl_xor_sync(0xFFFFFFFFu, mine.max, delta),
                        __shfl_xor_sync(0xFFFFFFFFu, mine.sum, delta)});
  }
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = mine;
  __syncthreads();
  MaxSum total = scratch[0];
  for (int w = 1; w < kWarps; ++w) total = merge(total, scratch[w]);
  if (total.max == -INFINITY) total.sum = NAN;
  return total;
}

template <Storage kS, bool kBy8>
__global__ void row_max_kernel(float* max, const void* logits, std::int64_t v) {
  __shared__ float scratch[kWarps];
  const std::int64_t i = blockIdx.x;
  const float m = row_max<kS, kBy8>(logits, i * v, v, scratch);
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

template <Storage kS, bool kBy8>
__global__ void exp_sum_kernel(float* sum_exp, void* logits, const float* max, std::int64_t v) {
  __shared__ float scratch[kWarps];
  const std::int64_t i = blockIdx.x;
  const float s = exp_and_sum<kS, kBy8>(logits, i * v, max[i], v, scratch);
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

// fp32 rows take two passes (the second overwrites them with the exps the backward reads); 16-bit
// rows one (row_max_and_sum).
template <Storage kS, bool kBy8>
__global__ void forward_kernel(float* loss, float* max, float* sum_exp, void* logits,
                               const std::int64_t* targets, std::int64_t v) {
  const std::int64_t i = blockIdx.x;
  const std::int64_t target = targets[i];
  if constexpr (kS != Storage::kF32) {
    __shared__ MaxSum pairs[kWarps];
    const MaxSum row = row_max_and_sum<kS, kBy8>(logits, i * v, v, pairs);
    if (threadIdx.x == 0) {
      const float target_logit =
          target >= 0 && target < v ? load<kS>(logits, i * v + target) - row.max : 0.0f;
      max[i] = row.max;
      sum_exp[i] = row.sum;
      loss[i] = logf(row.sum) - target_logit;
    }
    return;
  }
  __shared__ float scratch[kWarps];
  const float m = row_max<kS, kBy8>(logits, i * v, v, scratch);
  // Every thread reads the target's logit before any thread overwrites an fp32 row with exps.
  const float target_logit =
      target >= 0 && target < v ? load<kS>(logits, i * v + target) - m : 0.0f;
  __syncthreads();
  const float s = exp_and_sum<kS, kBy8>(logits, i * v, m, v, scratch);
  if (threadIdx.x == 0) {
    max[i] = m;
    sum_exp[i] = s;
    loss[i] = logf(s) - target_logit;
  }
}

// An fp32 `logits` holds the exps the forward left (max is not read, and may be null); a 16-bit
// one holds the logits, whose exps are recomputed as exp_and_sum computed them (the same fp32
// inputs, the same expf: the same bits), and the gradient is rounded once on store.
template <Storage kS, bool kBy8>
__global__ void backward_kernel(void* dlogits, const void* logits, const std::int64_t* targets,
                                const float* max, const float* sum_exp, const float* dloss,
                                std::int64_t v, std::int64_t vocab_start) {
  const std::int64_t i = blockIdx.x;
  const float inv = 1.0f / sum_exp[i], scale = dloss[i];
  const std::int64_t local = targets[i] - vocab_start;
  float m = 0.0f;
  if constexpr (kS != Storage::kF32) m = max[i];
  // Each element is read and written by the same thread, so dlogits may alias logits.
  for_row_elements<kS, kBy8>(logits, i * v, v, [&](std::int64_t j, const float* x) {
    float g[kRowStep<kBy8>];
    for (int k = 0; k < kRowStep<kBy8>; ++k) {
      float e = x[k];
      if constexpr (kS != Storage::kF32) e = expf(x[k] - m);
      g[k] = j + k == local ? (e * inv - 1.0f) * scale : e * inv * scale;
    }
    if constexpr (kBy8) {
      store8<kS>(dlogits, i * v + j, g);
    } else {
      store<kS>(dlogits, i * v + j, g[0]);
    }
  });
}

// Whether the row kernels take eight elements at a time (kBy8) over rows of v elements in these
// arrays (the .cu and the emulated tests pick with it).
inline bool rows_by_8(std::int64_t v, std::initializer_list<const void*> arrays) {
  return detail::fits_chunks_of_8(v, v, nullptr, arrays);
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
