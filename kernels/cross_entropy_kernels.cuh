// Device code of kernels/cross_entropy.cu (launched from there) and its launch shapes, plain CUDA
// with no runtime includes so that tests/unit/kernels_emulated_cross_entropy_test.cpp can compile
// it for the CPU under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and
// that test only; the kernels have internal linkage (see elementwise_kernels.cuh).
#pragma once
#include <algorithm>
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

// Elements per visit of for_row_elements.
template <bool kBy8>
constexpr int kRowStep = kBy8 ? 8 : 1;

// kBy8: a thread takes the row's elements eight at a time (16-byte accesses; rows of a multiple
// of 8 elements, 16-byte aligned), chunks threadIdx.x, + kThreads, …; otherwise one at a time,
// elements threadIdx.x, + kThreads, …. Either way a fixed order, so the results are deterministic;
// the two orders give the same max and elementwise values, and sums that differ by rounding.
// kBatch > 1 loads that many of a thread's visits before visiting them, in the same order (the
// same results): more loads in flight for a kernel that runs few warps an SM. kEvictFirst: the
// eight-element loads hint L2 to evict those bytes first (a row's last read). A visit may store
// over the elements it was given (each is the calling thread's alone).
template <Storage kS, bool kBy8, int kBatch = 1, bool kEvictFirst = false, typename Visit>
__device__ inline void for_row_elements(const void* row_base, std::int64_t first, std::int64_t v,
                                        Visit visit) {
  constexpr int kStep = kRowStep<kBy8>;
  const std::int64_t visits = kBy8 ? v / 8 : v;
  const auto load_visit = [&](std::int64_t k, auto& x) {  // generic: load8 wants float[8]
    if constexpr (kBy8) {
      load8<kS, kEvictFirst>(row_base, first + 8 * k, x);
    } else {
      x[0] = load<kS>(row_base, first + k);
    }
  };
  std::int64_t k = threadIdx.x;
  if constexpr (kBatch > 1) {
    for (; k + (kBatch - 1) * kThreads < visits; k += kBatch * kThreads) {
      float x[kBatch][kStep];
      for (int b = 0; b < kBatch; ++b) load_visit(k + b * kThreads, x[b]);
      for (int b = 0; b < kBatch; ++b) visit(kStep * (k + b * kThreads), x[b]);
    }
  }
  for (; k < visits; k += kThreads) {
    float x[kStep];
    load_visit(k, x);
    visit(kStep * k, x);
  }
}

template <Storage kS, bool kBy8, int kBatch = 1>
__device__ inline float row_max(const void* logits, std::int64_t first, std::int64_t v,
                                float* scratch) {
  float m = -INFINITY;
  for_row_elements<kS, kBy8, kBatch>(logits, first, v, [&](std::int64_t, const float* x) {
    for (int k = 0; k < kRowStep<kBy8>; ++k) m = x[k] > m ? x[k] : m;
  });
  return block_max(m, scratch);
}

// Σ_j exp(row[j] − max), returned to every thread. An fp32 row is overwritten with the exps (the
// backward reads them) unless kKeepRow; a 16-bit row is only read (rounded exps would change the
// gradient, so the backward recomputes them with the same expression).
template <Storage kS, bool kBy8, int kBatch = 1, bool kKeepRow = false>
__device__ inline float exp_and_sum(void* logits, std::int64_t first, float max, std::int64_t v,
                                    float* scratch) {
  float sum = 0.0f;
  for_row_elements<kS, kBy8, kBatch>(logits, first, v, [&](std::int64_t j, const float* x) {
    float e[kRowStep<kBy8>];
    for (int k = 0; k < kRowStep<kBy8>; ++k) {
      e[k] = expf(x[k] - max);
      sum += e[k];
    }
    if constexpr (kS == Storage::kF32 && !kKeepRow) {
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

template <Storage kS, bool kBy8, int kBatch = 1>
__device__ inline MaxSum row_max_and_sum(const void* logits, std::int64_t first, std::int64_t v,
                                         MaxSum* scratch) {
  MaxSum mine{-INFINITY, 0.0f};
  for_row_elements<kS, kBy8, kBatch>(logits, first, v, [&](std::int64_t, const float* x) {
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

// Row i's gradient (e·inv − [j == local])·scale, e = exp(x − m) recomputed from the logits (as
// exp_and_sum computed it: the same fp32 inputs, the same expf, the same bits) or, with
// kExpsStored, read as the fp32 forward left them; rounded once on store. Each element is read
// and written by the same thread, so dlogits may alias logits. kEvictFirst: the row's loads and
// the gradient's stores (eight elements at a time) hint L2 to evict them first.
template <Storage kS, bool kBy8, bool kExpsStored, int kBatch = 1, bool kEvictFirst = false>
__device__ inline void row_gradient(void* dlogits, const void* logits, std::int64_t first,
                                    std::int64_t v, float m, float inv, float scale,
                                    std::int64_t local) {
  for_row_elements<kS, kBy8, kBatch, kEvictFirst>(
      logits, first, v, [&](std::int64_t j, const float* x) {
        float g[kRowStep<kBy8>];
        for (int k = 0; k < kRowStep<kBy8>; ++k) {
          const float e = kExpsStored ? x[k] : expf(x[k] - m);
          g[k] = j + k == local ? (e * inv - 1.0f) * scale : e * inv * scale;
        }
        if constexpr (kBy8) {
          store8<kS, kEvictFirst>(dlogits, first + j, g);
        } else {
          store<kS>(dlogits, first + j, g[0]);
        }
      });
}

// An fp32 `logits` holds the exps the forward left (max is not read, and may be null); a 16-bit
// one holds the logits, whose exps are recomputed, and the gradient is rounded once on store.
template <Storage kS, bool kBy8>
__global__ void backward_kernel(void* dlogits, const void* logits, const std::int64_t* targets,
                                const float* max, const float* sum_exp, const float* dloss,
                                std::int64_t v, std::int64_t vocab_start) {
  const std::int64_t i = blockIdx.x;
  constexpr bool kExpsStored = kS == Storage::kF32;
  row_gradient<kS, kBy8, kExpsStored>(dlogits, logits, i * v, v, kExpsStored ? 0.0f : max[i],
                                      1.0f / sum_exp[i], dloss[i], targets[i] - vocab_start);
}

// Loads a thread keeps in flight in forward_backward_kernel, which runs few blocks an SM.
constexpr int kFusedLoadBatch = 4;

// forward_kernel then backward_kernel for an unsharded vocabulary, the gradient written where
// dloss is known before the forward (a training step's loss · scale): loss [n] and dlogits, which
// may alias logits. Same arithmetic in the same order, so the same bits as the two kernels. Each
// block takes rows blockIdx.x, + gridDim.x, …: the grid (forward_backward_shape) keeps few enough
// rows in flight that a row read for its sums is still in L2 when it is read again for its
// gradient, so it crosses DRAM once each way. 16-bit rows: one pass for the sums, one for the
// gradient; fp32 rows: the max, the sum and the gradient passes (the exps are recomputed instead
// of stored).
template <Storage kS, bool kBy8>
__global__ void forward_backward_kernel(float* loss, void* dlogits, const void* logits,
                                        const std::int64_t* targets, const float* dloss,
                                        std::int64_t n, std::int64_t v) {
  __shared__ MaxSum pairs[kWarps];
  __shared__ float scratch[kWarps];
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const std::int64_t target = targets[i];
    float m = 0.0f, s = 0.0f;
    if constexpr (kS != Storage::kF32) {
      const MaxSum row = row_max_and_sum<kS, kBy8, kFusedLoadBatch>(logits, i * v, v, pairs);
      m = row.max;
      s = row.sum;
    } else {
      m = row_max<kS, kBy8, kFusedLoadBatch>(logits, i * v, v, scratch);
      s = exp_and_sum<kS, kBy8, kFusedLoadBatch, true>(const_cast<void*>(logits), i * v, m, v,
                                                       scratch);
    }
    // Read before any thread overwrites the row with its gradient.
    if (threadIdx.x == 0) {
      const float target_logit =
          target >= 0 && target < v ? load<kS>(logits, i * v + target) - m : 0.0f;
      loss[i] = logf(s) - target_logit;
    }
    __syncthreads();
    // The row's last read and the gradient leave L2 first: rows still to be read again stay.
    row_gradient<kS, kBy8, false, kFusedLoadBatch, true>(dlogits, logits, i * v, v, m, 1.0f / s,
                                                         dloss[i], target);
  }
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

// forward_backward_kernel over n rows of v elements of element_bytes on a device of `sms` SMs and
// l2_bytes of L2: as many blocks an SM as keep the rows in flight (one a block) within 60% of the
// L2, so that a row is still there when its gradient pass reads it again, but at least 2 (16
// warps an SM; their batched loads keep about 32 KB in flight an SM) and at most 8 (an SM's
// limit at kThreads); never more blocks than rows. GPT-2's bf16 rows (50304 elements, 100 KB) on
// an H100 (132 SMs, 50 MB): 2 blocks an SM, 26 MB in flight. `scale` multiplies the blocks an
// SM (within the same 2 to 8): a variant under trial, the same bits.
inline detail::LaunchShape forward_backward_shape(std::int64_t n, std::int64_t v, int element_bytes,
                                                  int sms, std::int64_t l2_bytes, int scale = 1) {
  const double row_bytes = static_cast<double>(v) * element_bytes;
  const double fit =
      0.6 * static_cast<double>(l2_bytes) / (std::max(sms, 1) * std::max(row_bytes, 1.0));
  const std::int64_t per_sm = std::clamp<std::int64_t>(
      std::clamp<std::int64_t>(static_cast<std::int64_t>(fit), 2, 8) * std::max(scale, 1), 2, 8);
  const std::int64_t blocks =
      std::clamp<std::int64_t>(per_sm * std::max(sms, 1), 1, std::max<std::int64_t>(n, 1));
  return {{static_cast<unsigned>(blocks)}, {detail::kThreads}};
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
