#include "kernels/adam.h"
#include "kernels/check.h"
#include "kernels/device_common.cuh"

namespace mds::kernels {

namespace {

using detail::block_sum;
using detail::grid_for;
using detail::kThreads;
using detail::kWarps;

__global__ void adamw_kernel(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                             std::int64_t n, ops::AdamWConfig config, float bias_correction1,
                             float bias_correction2) {
  const float beta1 = config.beta1, beta2 = config.beta2;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float g = grads[i];
    float m = exp_avg[i], v = exp_avg_sq[i];
    const float p = params[i];
    m = beta1 * m + (1 - beta1) * g;
    v = beta2 * v + (1 - beta2) * g * g;
    const float m_unbiased = m / bias_correction1;
    const float v_unbiased = v / bias_correction2;
    const float denom = sqrtf(v_unbiased) + config.eps;
    const float update = (m_unbiased / denom) + (config.weight_decay * p);
    params[i] = p - (config.lr * update);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

// Block b sums elements [b·per_block, (b + 1)·per_block), its threads striding through them.
__global__ void partial_squares_kernel(double* partials, const float* x, std::int64_t n,
                                       std::int64_t per_block) {
  __shared__ double scratch[kWarps];
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * per_block;
  const std::int64_t end = begin + per_block < n ? begin + per_block : n;
  double sum = 0.0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double value = x[i];
    sum += value * value;
  }
  const double total = block_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sum_partials_kernel(double* result, const double* partials) {
  __shared__ double scratch[kWarps];
  double sum = 0.0;
  for (std::int64_t b = threadIdx.x; b < kSumOfSquaresPartials; b += kThreads) sum += partials[b];
  const double total = block_sum(sum, scratch);
  if (threadIdx.x == 0) *result = total;
}

}  // namespace

void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const ops::AdamWConfig& config, float bias_correction1,
                float bias_correction2, cudaStream_t stream) {
  if (n <= 0) return;
  adamw_kernel<<<grid_for(n), kThreads, 0, stream>>>(params, grads, exp_avg, exp_avg_sq, n, config,
                                                     bias_correction1, bias_correction2);
  check_launch("kernels::adamw_step");
}

void sum_of_squares(double* result, double* partials, const float* x, std::int64_t n,
                    cudaStream_t stream) {
  const std::int64_t per_block =
      n <= 0 ? 0 : (n + kSumOfSquaresPartials - 1) / kSumOfSquaresPartials;
  partial_squares_kernel<<<static_cast<unsigned>(kSumOfSquaresPartials), kThreads, 0, stream>>>(
      partials, x, n, per_block);
  check_launch("kernels::sum_of_squares (partials)");
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(result, partials);
  check_launch("kernels::sum_of_squares (total)");
}

double sum_of_squares(const float* x, std::int64_t n, cudaStream_t stream) {
  void* workspace = nullptr;
  check_cuda(cudaMallocAsync(&workspace, (kSumOfSquaresPartials + 1) * sizeof(double), stream),
             "kernels::sum_of_squares (cudaMallocAsync)");
  double* result = static_cast<double*>(workspace);
  sum_of_squares(result, result + 1, x, n, stream);
  double host = 0.0;
  check_cuda(cudaMemcpyAsync(&host, result, sizeof host, cudaMemcpyDeviceToHost, stream),
             "kernels::sum_of_squares (copy result)");
  check_cuda(cudaFreeAsync(workspace, stream), "kernels::sum_of_squares (cudaFreeAsync)");
  check_cuda(cudaStreamSynchronize(stream), "kernels::sum_of_squares (synchronize)");
  return host;
}

}  // namespace mds::kernels
