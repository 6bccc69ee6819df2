#include "kernels/adam.h"
#include "kernels/adam_kernels.cuh"
#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/launch.cuh"

namespace mds::kernels {

namespace {

using detail::launch;
using namespace adam_detail;

}  // namespace

void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const ops::AdamWConfig& config, float bias_correction1,
                float bias_correction2, cudaStream_t stream) {
  if (n <= 0) return;
  launch("kernels::adamw_step", adamw_kernel, step_shape(n), stream, params, grads, exp_avg,
         exp_avg_sq, n, config, bias_correction1, bias_correction2);
}

void adamw_step_and_cast(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::int64_t n, const ops::AdamWConfig& config, float bias_correction1,
                         float bias_correction2, void* low, tensor::DType low_dtype,
                         cudaStream_t stream) {
  if (n <= 0) return;
  if (low_dtype != tensor::DType::kBFloat16 && low_dtype != tensor::DType::kFloat16) {
    base::fail("cuda: kernels::adamw_step_and_cast: the rounded weights must be bf16 or fp16");
  }
  launch("kernels::adamw_step_and_cast", adamw_cast_kernel, step_shape(n), stream, params, grads,
         exp_avg, exp_avg_sq, static_cast<std::uint16_t*>(low), rounds_to_bf16(low_dtype), n,
         config, bias_correction1, bias_correction2);
}

void sum_of_squares(double* result, double* partials, const float* x, std::int64_t n,
                    cudaStream_t stream) {
  launch("kernels::sum_of_squares (partials)", partial_squares_kernel, partials_shape(), stream,
         partials, x, n);
  launch("kernels::sum_of_squares (total)", sum_partials_kernel, total_shape(), stream, result,
         partials);
}

double sum_of_squares(const float* x, std::int64_t n, cudaStream_t stream, Scratch* scratch) {
  const CallScratch workspace(scratch, (kSumOfSquaresPartials + 1) * sizeof(double), stream);
  auto* result = static_cast<double*>(workspace.data());
  sum_of_squares(result, result + 1, x, n, stream);
  double host = 0.0;
  check_cuda(cudaMemcpyAsync(&host, result, sizeof host, cudaMemcpyDeviceToHost, stream),
             "kernels::sum_of_squares (copy result)");
  check_cuda(cudaStreamSynchronize(stream), "kernels::sum_of_squares (synchronize)");
  return host;
}

}  // namespace mds::kernels
