#include "kernels/adam.h"

#include "ops/cuda/backend.h"
#include "ops/cuda/resources.h"

namespace mds::ops::cuda {

void adamw_step(const DeviceContext& ctx, float* params, const float* grads, float* exp_avg,
                float* exp_avg_sq, std::int64_t n, const AdamWConfig& config,
                float bias_correction1, float bias_correction2) {
  kernels::adamw_step(params, grads, exp_avg, exp_avg_sq, n, config, bias_correction1,
                      bias_correction2, stream_of(ctx));
}

void adamw_step_and_cast(const DeviceContext& ctx, float* params, const float* grads,
                         float* exp_avg, float* exp_avg_sq, std::int64_t n,
                         const AdamWConfig& config, float bias_correction1, float bias_correction2,
                         void* low, tensor::DType low_dtype) {
  kernels::adamw_step_and_cast(params, grads, exp_avg, exp_avg_sq, n, config, bias_correction1,
                               bias_correction2, low, low_dtype, stream_of(ctx));
}

double sum_of_squares(const DeviceContext& ctx, const float* x, std::int64_t n) {
  return kernels::sum_of_squares(x, n, stream_of(ctx), &ctx.cuda().scratch);
}

}  // namespace mds::ops::cuda
