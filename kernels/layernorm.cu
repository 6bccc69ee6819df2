#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/layernorm.h"
#include "kernels/reduce_columns.cuh"

namespace mds::kernels {

namespace {

using detail::block_sum;
using detail::kThreads;
using detail::kWarps;
using detail::load;
using detail::Storage;
using detail::store;

// Activations (out, x, residual, sum_out, dx, dout) are stored as kS: widened on load, rounded on
// store; weight, bias, mean and rstd are fp32. With kResidual, the row normalized is x + residual,
// written to sum_out first and re-read from there (rounded to kS, as the CPU's add then
// layernorm_forward; each thread re-reads only the elements it wrote itself, so no barrier is
// needed, and sum_out may alias x or residual).
template <Storage kS, bool kResidual>
__global__ void forward_kernel(void* out, float* mean, float* rstd, void* sum_out, const void* x,
                               const void* residual, const float* weight, const float* bias,
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
    store<kS>(out, first + c, (load<kS>(row, first + c) - m) * s * weight[c] + bias[c]);
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = m;
    rstd[blockIdx.x] = s;
  }
}

template <Storage kS>
__global__ void backward_dx_kernel(void* dx, const void* dout, const void* x, const float* weight,
                                   const float* mean, const float* rstd, std::int64_t cols) {
  __shared__ float scratch[kWarps];
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * cols;
  const float m = mean[blockIdx.x], s = rstd[blockIdx.x];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float g = load<kS>(dout, first + c) * weight[c];
    g_sum += g;
    gx_sum += g * ((load<kS>(x, first + c) - m) * s);
  }
  const float g_mean = block_sum(g_sum, scratch) / static_cast<float>(cols);
  const float gx_mean = block_sum(gx_sum, scratch) / static_cast<float>(cols);
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const std::int64_t i = first + c;
    const float xhat = (load<kS>(x, i) - m) * s;
    store<kS>(dx, i,
              load<kS>(dx, i) + s * (load<kS>(dout, i) * weight[c] - g_mean - xhat * gx_mean));
  }
}

template <Storage kS>
__global__ void backward_params_kernel(float* dweight, float* dbias, const void* dout,
                                       const void* x, const float* mean, const float* rstd,
                                       std::int64_t rows, std::int64_t cols) {
  detail::sum_columns<2>(
      rows, cols,
      [&](std::int64_t r, std::int64_t, std::int64_t i, float* sums) {
        const float g = load<kS>(dout, i);
        sums[0] += g * ((load<kS>(x, i) - mean[r]) * rstd[r]);
        sums[1] += g;
      },
      [&](std::int64_t c, const float* total) {
        if (dweight != nullptr) dweight[c] += total[0];
        if (dbias != nullptr) dbias[c] += total[1];
      });
}

}  // namespace

void layernorm_forward(void* out, float* mean, float* rstd, const void* x, const float* weight,
                       const float* bias, tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                       float eps, cudaStream_t stream) {
  detail::with_storage(dtype, "layernorm_forward", [&](auto s) {
    if (rows <= 0 || cols <= 0) return;
    forward_kernel<decltype(s)::value, false>
        <<<detail::row_grid(rows, "kernels::layernorm"), kThreads, 0, stream>>>(
            out, mean, rstd, nullptr, x, nullptr, weight, bias, cols, eps);
    check_launch("kernels::layernorm_forward");
  });
}

void residual_layernorm_forward(void* sum_out, void* out, float* mean, float* rstd, const void* x,
                                const void* residual, const float* weight, const float* bias,
                                tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                                float eps, cudaStream_t stream) {
  detail::with_storage(dtype, "residual_layernorm_forward", [&](auto s) {
    if (rows <= 0 || cols <= 0) return;
    forward_kernel<decltype(s)::value, true>
        <<<detail::row_grid(rows, "kernels::layernorm"), kThreads, 0, stream>>>(
            out, mean, rstd, sum_out, x, residual, weight, bias, cols, eps);
    check_launch("kernels::residual_layernorm_forward");
  });
}

void layernorm_backward(void* dx, float* dweight, float* dbias, const void* dout, const void* x,
                        const float* weight, const float* mean, const float* rstd,
                        tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                        cudaStream_t stream) {
  detail::with_storage(dtype, "layernorm_backward", [&](auto s) {
    constexpr Storage kS = decltype(s)::value;
    if (rows <= 0 || cols <= 0) return;
    backward_dx_kernel<kS><<<detail::row_grid(rows, "kernels::layernorm"), kThreads, 0, stream>>>(
        dx, dout, x, weight, mean, rstd, cols);
    check_launch("kernels::layernorm_backward (dx)");
    if (dweight == nullptr && dbias == nullptr) return;
    backward_params_kernel<kS>
        <<<detail::column_blocks(cols), dim3(detail::kColumnTile, detail::kRowLanes), 0, stream>>>(
            dweight, dbias, dout, x, mean, rstd, rows, cols);
    check_launch("kernels::layernorm_backward (dweight, dbias)");
  });
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, std::int64_t rows, std::int64_t cols, float eps,
                       cudaStream_t stream) {
  layernorm_forward(out, mean, rstd, x, weight, bias, tensor::DType::kFloat32, rows, cols, eps,
                    stream);
}

void residual_layernorm_forward(float* sum_out, float* out, float* mean, float* rstd,
                                const float* x, const float* residual, const float* weight,
                                const float* bias, std::int64_t rows, std::int64_t cols, float eps,
                                cudaStream_t stream) {
  residual_layernorm_forward(sum_out, out, mean, rstd, x, residual, weight, bias,
                             tensor::DType::kFloat32, rows, cols, eps, stream);
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd,
                        std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, tensor::DType::kFloat32, rows,
                     cols, stream);
}

}  // namespace mds::kernels
