#include "ops/cpu/adam.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace mds::ops::cpu {

void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                std::int64_t n, const AdamWConfig& config, float bias_correction1,
                float bias_correction2) {
  const float beta1 = config.beta1, beta2 = config.beta2;
  // Statement by statement as csrc/multi_tensor_adam.cu (ADAM_MODE_1), so rounding matches.
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = grads[i];
    float m = exp_avg[i], v = exp_avg_sq[i], p = params[i];
    m = beta1 * m + (1 - beta1) * g;
    v = beta2 * v + (1 - beta2) * g * g;
    const float m_unbiased = m / bias_correction1;
    const float v_unbiased = v / bias_correction2;
    const float denom = std::sqrt(v_unbiased) + config.eps;
    const float update = (m_unbiased / denom) + (config.weight_decay * p);
    params[i] = p - (config.lr * update);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

double sum_of_squares(const float* x, std::int64_t n) {
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
    for (std::int64_t i = begin; i < end; ++i) sum += static_cast<double>(x[i]) * x[i];
    partial[static_cast<std::size_t>(blk)] = sum;
  }
  double total = 0.0;
  for (const double s : partial) total += s;
  return total;
}

}  // namespace mds::ops::cpu
