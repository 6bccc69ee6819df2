#include "ops/cpu/layernorm.h"

#include <cmath>

namespace mds::ops::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, std::int64_t rows, std::int64_t cols, float eps) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    // Row statistics in double with two passes: the reference should be closer to exact than
    // the GPU's fp32 Welford it is compared with.
    double sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) sum += row[c];
    const double mu = sum / static_cast<double>(cols);
    double sq = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double d = row[c] - mu;
      sq += d * d;
    }
    const double var = sq / static_cast<double>(cols);
    const float m = static_cast<float>(mu);
    const float s = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    float* y = out + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) y[c] = (row[c] - m) * s * weight[c] + bias[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd,
                        std::int64_t rows, std::int64_t cols) {
  // With g = dout·w and x̂ = (x − mean)·rstd:
  //   dx = rstd · (g − mean(g) − x̂ · mean(g · x̂)).
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    const float* grow = dout + r * cols;
    const float m = mean[r], s = rstd[r];
    double g_sum = 0.0, gx_sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float g = grow[c] * weight[c];
      g_sum += g;
      gx_sum += static_cast<double>(g) * ((row[c] - m) * s);
    }
    const float g_mean = static_cast<float>(g_sum / static_cast<double>(cols));
    const float gx_mean = static_cast<float>(gx_sum / static_cast<double>(cols));
    float* drow = dx + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float xhat = (row[c] - m) * s;
      drow[c] += s * (grow[c] * weight[c] - g_mean - xhat * gx_mean);
    }
  }
  if (dweight == nullptr && dbias == nullptr) return;
    // Parameter gradients reduce over rows; one column per iteration keeps the row order fixed, so
    // the sums do not depend on the thread count.
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < cols; ++c) {
    float dw = 0.0f, db = 0.0f;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float g = dout[r * cols + c];
      dw += g * ((x[r * cols + c] - mean[r]) * rstd[r]);
      db += g;
    }
    if (dweight != nullptr) dweight[c] += dw;
    if (dbias != nullptr) dbias[c] += db;
  }
}

}  // namespace mds::ops::cpu
