#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/layernorm.h"
#include "kernels/reduce_columns.cuh"

namespace mds::kernels {

namespace {

using detail::block_sum;
using detail::kThreads;
using detail::kWarps;

// With kResidual, the row normalized is x + residual, written to sum_out first (each thread
// re-reads only the elements it wrote itself, so no barrier is needed, and sum_out may alias x or
// residual).
template <bool kResidual>
__global__ void forward_kernel(float* out, float* mean, float* rstd, float* sum_out, const float* x,
                               const float* residual, const float* weight, const float* bias,
                               std::int64_t cols, float eps) {
  __shared__ float scratch[kWarps];
  const std::int64_t r = blockIdx.x;
  const float* row = x + r * cols;
  if constexpr (kResidual) {
    float* sum_row = sum_out + r * cols;
    const float* residual_row = residual + r * cols;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      sum_row[c] = row[c] + residual_row[c];
    row = sum_row;
  }
  float sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) sum += row[c];
  const float m = block_sum(sum, scratch) / static_cast<float>(cols);
  float sq = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float d = row[c] - m;
    sq += d * d;
  }
  const float var = block_sum(sq, scratch) / static_cast<float>(cols);
  const float s = 1.0f / sqrtf(var + eps);
  float* y = out + r * cols;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
    y[c] = (row[c] - m) * s * weight[c] + bias[c];
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
}

__global__ void backward_dx_kernel(float* dx, const float* dout, const float* x,
                                   const float* weight, const float* mean, const float* rstd,
                                   std::int64_t cols) {
  __shared__ float scratch[kWarps];
  const std::int64_t r = blockIdx.x;
  const float* row = x + r * cols;
  const float* grow = dout + r * cols;
  const float m = mean[r], s = rstd[r];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float g = grow[c] * weight[c];
    g_sum += g;
    gx_sum += g * ((row[c] - m) * s);
  }
  const float g_mean = block_sum(g_sum, scratch) / static_cast<float>(cols);
  const float gx_mean = block_sum(gx_sum, scratch) / static_cast<float>(cols);
  float* drow = dx + r * cols;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float xhat = (row[c] - m) * s;
    drow[c] += s * (grow[c] * weight[c] - g_mean - xhat * gx_mean);
  }
}

__global__ void backward_params_kernel(float* dweight, float* dbias, const float* dout,
                                       const float* x, const float* mean, const float* rstd,
                                       std::int64_t rows, std::int64_t cols) {
  detail::sum_columns<2>(
      rows, cols,
      [&](std::int64_t r, std::int64_t, std::int64_t i, float* sums) {
        const float g = dout[i];
        sums[0] += g * ((x[i] - mean[r]) * rstd[r]);
        sums[1] += g;
      },
      [&](std::int64_t c, const float* total) {
        if (dweight != nullptr) dweight[c] += total[0];
        if (dbias != nullptr) dbias[c] += total[1];
      });
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, std::int64_t rows, std::int64_t cols, float eps,
                       cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  forward_kernel<false><<<detail::row_grid(rows, "kernels::layernorm"), kThreads, 0, stream>>>(
      out, mean, rstd, nullptr, x, nullptr, weight, bias, cols, eps);
  check_launch("kernels::layernorm_forward");
}

void residual_layernorm_forward(float* sum_out, float* out, float* mean, float* rstd,
                                const float* x, const float* residual, const float* weight,
                                const float* bias, std::int64_t rows, std::int64_t cols, float eps,
                                cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  forward_kernel<true><<<detail::row_grid(rows, "kernels::layernorm"), kThreads, 0, stream>>>(
      out, mean, rstd, sum_out, x, residual, weight, bias, cols, eps);
  check_launch("kernels::residual_layernorm_forward");
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd,
                        std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  backward_dx_kernel<<<detail::row_grid(rows, "kernels::layernorm"), kThreads, 0, stream>>>(
      dx, dout, x, weight, mean, rstd, cols);
  check_launch("kernels::layernorm_backward (dx)");
  if (dweight == nullptr && dbias == nullptr) return;
  backward_params_kernel<<<detail::column_blocks(cols),
                           dim3(detail::kColumnTile, detail::kRowLanes), 0, stream>>>(
      dweight, dbias, dout, x, mean, rstd, rows, cols);
  check_launch("kernels::layernorm_backward (dweight, dbias)");
}

}  // namespace mds::kernels
