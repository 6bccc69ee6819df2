#include "kernels/adam.h"
#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/sum_of_squares.cuh"

namespace mds::kernels {

namespace {

using detail::grid_for;
using detail::kThreads;
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

}  // namespace

void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const ops::AdamWConfig& config, float bias_correction1,
                float bias_correction2, cudaStream_t stream) {
  if (n <= 0) return;
  adamw_kernel<<<grid_for(n), kThreads, 0, stream>>>(params, grads, exp_avg, exp_avg_sq, n, config,
                                                     bias_correction1, bias_correction2);
  check_launch("kernels::adamw_step");
}

void adamw_step_and_cast(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::int64_t n, const ops::AdamWConfig& config, float bias_correction1,
                         float bias_correction2, void* low, tensor::DType low_dtype,
                         cudaStream_t stream) {
  if (n <= 0) return;
  if (low_dtype != tensor::DType::kBFloat16 && low_dtype != tensor::DType::kFloat16) {
    base::fail("cuda: kernels::adamw_step_and_cast: the rounded weights must be bf16 or fp16");
  }
  adamw_cast_kernel<<<grid_for(n), kThreads, 0, stream>>>(
      params, grads, exp_avg, exp_avg_sq, static_cast<std::uint16_t*>(low),
      low_dtype == tensor::DType::kBFloat16, n, config, bias_correction1, bias_correction2);
  check_launch("kernels::adamw_step_and_cast");
}

void sum_of_squares(double* result, double* partials, const float* x, std::int64_t n,
                    cudaStream_t stream) {
  partial_squares_kernel<<<static_cast<unsigned>(kSumOfSquaresPartials), kThreads, 0, stream>>>(
      partials, x, n);
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
