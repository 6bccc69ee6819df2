// Device code of kernels/layernorm.cu (launched from there) and its launch shapes, plain CUDA with
// no runtime includes so that tests/unit/kernels_emulated_layernorm_test.cpp can compile it for
// the CPU under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and that
// test only; the kernels have internal linkage (see elementwise_kernels.cuh).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/device_portable.cuh"
#include "kernels/reduce_columns.cuh"

namespace mds::kernels::layernorm_detail {
namespace {

using detail::block_sum;
using detail::kThreads;
using detail::kWarps;
using detail::load;
using detail::Storage;
using detail::store;

// Activations (out, x, residual, sum_out, dx, dout) are stored as kS: widened on load, rounded on
// store; weight and bias as kP (fp32, or kS: widened on load, so 16-bit parameters give the bits
// of their fp32 widening); mean and rstd are fp32. With kResidual, the row normalized is x +
// residual, written to sum_out first and re-read from there (rounded to kS, as the CPU's add then
// layernorm_forward; each thread re-reads only the elements it wrote itself, so no barrier is
// needed, and sum_out may alias x or residual).
template <Storage kS, Storage kP, bool kResidual>
__global__ void forward_kernel(void* out, float* mean, float* rstd, void* sum_out, const void* x,
                               const void* residual, const void* weight, const void* bias,
                               std::int64_t cols, float eps) {
  __shared__ float scratch[kWarps];
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * cols;
  const void* row = x;
  if constexpr (kResidual) {
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      store<kS>(sum_out, first + c, load<kS>(x, first + c) + load<kS>(residual, first + c));
    row = sum_out;
  }
  float sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) sum += load<kS>(row, first + c);
  const float m = block_sum(sum, scratch) / static_cast<float>(cols);
  float sq = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float d = load<kS>(row, first + c) - m;
    sq += d * d;
  }
  const float var = block_sum(sq, scratch) / static_cast<float>(cols);
  const float s = 1.0f / sqrtf(var + eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
    store<kS>(out, first + c,
              (load<kS>(row, first + c) - m) * s * load<kP>(weight, c) + load<kP>(bias, c));
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = m;
    rstd[blockIdx.x] = s;
  }
}

template <Storage kS, Storage kP>
__global__ void backward_dx_kernel(void* dx, const void* dout, const void* x, const void* weight,
                                   const float* mean, const float* rstd, std::int64_t cols) {
  __shared__ float scratch[kWarps];
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * cols;
  const float m = mean[blockIdx.x], s = rstd[blockIdx.x];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float g = load<kS>(dout, first + c) * load<kP>(weight, c);
    g_sum += g;
    gx_sum += g * ((load<kS>(x, first + c) - m) * s);
  }
  const float g_mean = block_sum(g_sum, scratch) / static_cast<float>(cols);
  const float gx_mean = block_sum(gx_sum, scratch) / static_cast<float>(cols);
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const std::int64_t i = first + c;
    const float xhat = (load<kS>(x, i) - m) * s;
    store<kS>(
        dx, i,
        load<kS>(dx, i) + s * (load<kS>(dout, i) * load<kP>(weight, c) - g_mean - xhat * gx_mean));
  }
}

template <Storage kS>
__global__ void backward_params_kernel(const void* dout, const void* x, const float* mean,
                                       const float* rstd, std::int64_t rows, std::int64_t cols,
                                       float* partials) {
  detail::sum_columns<2>(
      rows, cols,
      [&](std::int64_t r, std::int64_t, std::int64_t i, float* sums) {
        const float g = load<kS>(dout, i);
        sums[0] += g * ((load<kS>(x, i) - mean[r]) * rstd[r]);
        sums[1] += g;
      },
      partials);
}

// forward_kernel and backward_dx_kernel: one block per row.
inline detail::LaunchShape row_shape(std::int64_t rows) {
  return detail::row_shape(rows, "kernels::layernorm");
}

}  // namespace
}  // namespace mds::kernels::layernorm_detail
