#include "ops/cpu/adam.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace mds::ops::cpu {

namespace {

// One element's step, statement by statement as csrc/multi_tensor_adam.cu (ADAM_MODE_1), so
// rounding matches; returns the new weight.
inline float adamw_element(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                           std::int64_t i, const AdamWConfig& config, float bias_correction1,
                           float bias_correction2) {
  const float beta1 = config.beta1, beta2 = config.beta2;
  const float g = grads[i];
  float m = exp_avg[i], v = exp_avg_sq[i];
  const float p = params[i];
  m = beta1 * m + (1 - beta1) * g;
  v = beta2 * v + (1 - beta2) * g * g;
  const float m_unbiased = m / bias_correction1;
  const float v_unbiased = v / bias_correction2;
  const float denom = std::sqrt(v_unbiased) + config.eps;
  const float update = (m_unbiased / denom) + (config.weight_decay * p);
  const float updated = p - (config.lr * update);
  params[i] = updated;
  exp_avg[i] = m;
  exp_avg_sq[i] = v;
  return updated;
}

template <typename Low, typename Round>
void adamw_and_round(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                     std::int64_t n, const AdamWConfig& config, float bias_correction1,
                     float bias_correction2, Low* low, Round round) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    low[i] = round(adamw_element(params, grads, exp_avg, exp_avg_sq, i, config, bias_correction1,
                                 bias_correction2));
  }
}

}  // namespace

void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const AdamWConfig& config, float bias_correction1,
                float bias_correction2) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    adamw_element(params, grads, exp_avg, exp_avg_sq, i, config, bias_correction1,
                  bias_correction2);
  }
}

void adamw_step_and_cast(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::int64_t n, const AdamWConfig& config, float bias_correction1,
                         float bias_correction2, void* low, tensor::DType low_dtype) {
  if (low_dtype == tensor::DType::kBFloat16) {
    adamw_and_round(params, grads, exp_avg, exp_avg_sq, n, config, bias_correction1,
                    bias_correction2, static_cast<tensor::BFloat16*>(low),
                    [](float v) { return tensor::to_bfloat16(v); });
  } else {
    adamw_and_round(params, grads, exp_avg, exp_avg_sq, n, config, bias_correction1,
                    bias_correction2, static_cast<tensor::Float16*>(low),
                    [](float v) { return tensor::to_float16(v); });
  }
}

namespace {

template <typename T>
double squares_in_blocks(const T* x, std::int64_t n) {
  // A fixed number of contiguous blocks, each summed in order, then the block sums in order: the
  // result is the same for every thread count.
  constexpr std::int64_t kBlocks = 64;
  std::array<double, kBlocks> partial{};
  const std::int64_t per_block = (n + kBlocks - 1) / kBlocks;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < kBlocks; ++blk) {
    const std::int64_t begin = std::min(n, blk * per_block);
    const std::int64_t end = std::min(n, begin + per_block);
    double sum = 0.0;
    for (std::int64_t i = begin; i < end; ++i) {
      const double value = tensor::to_float(x[i]);
      sum += value * value;
    }
    partial[static_cast<std::size_t>(blk)] = sum;
  }
  double total = 0.0;
  for (const double s : partial) total += s;
  return total;
}

}  // namespace

double sum_of_squares(const float* x, std::int64_t n) {
  return squares_in_blocks(x, n);
}

double sum_of_squares(const void* x, tensor::DType dtype, std::int64_t n) {
  switch (dtype) {
    case tensor::DType::kBFloat16:
      return squares_in_blocks(static_cast<const tensor::BFloat16*>(x), n);
    case tensor::DType::kFloat16:
      return squares_in_blocks(static_cast<const tensor::Float16*>(x), n);
    default:
      return squares_in_blocks(static_cast<const float*>(x), n);
  }
}

}  // namespace mds::ops::cpu
