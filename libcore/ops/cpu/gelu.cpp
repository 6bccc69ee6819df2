#include "ops/cpu/gelu.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "ops/cpu/vector_math.h"

namespace mds::ops::cpu {

// The expressions keep upstream's operation order (torch evaluates left to right in fp32); tanh is
// vector_tanh (within 2^-23 of tanh, vectorizable), which PyTorch's own vectorized tanh is not
// bit-equal to either.
float gelu(float z, GeluKind kind) {
  switch (kind) {
    case GeluKind::kTanhFused:
      return z * 0.5f * (1.0f + vector_tanh(0.79788456f * z * (1.0f + 0.044715f * z * z)));
    case GeluKind::kTanhOpenAI:
      // megatron/model/utils.py openai_gelu / gelu_impl.
      return 0.5f * z * (1.0f + vector_tanh(0.7978845608028654f * z * (1.0f + 0.044715f * z * z)));
    case GeluKind::kErf:
      return z * 0.5f * (1.0f + std::erf(z * 0.70710678118654752f));
  }
  return 0.0f;
}

float gelu_derivative(float z, GeluKind kind) {
  switch (kind) {
    case GeluKind::kTanhFused: {
      // megatron/model/fused_bias_gelu.py bias_gelu_back, 0.1070322243 = 3·0.044715·0.79788456.
      const float t = vector_tanh(0.79788456f * z * (1.0f + 0.044715f * z * z));
      return 0.5f * z * ((1.0f - t * t) * (0.79788456f + 0.1070322243f * z * z)) +
             0.5f * (1.0f + t);
    }
    case GeluKind::kTanhOpenAI: {
      const float c = 0.7978845608028654f;
      const float t = vector_tanh(c * z * (1.0f + 0.044715f * z * z));
      return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * z * z);
    }
    case GeluKind::kErf: {
      // 0.3989422804 = 1/sqrt(2π).
      return 0.5f * (1.0f + std::erf(z * 0.70710678118654752f)) +
             z * 0.3989422804014327f * std::exp(-0.5f * z * z);
    }
  }
  return 0.0f;
}

void gelu_forward(float* out, const float* x, std::int64_t n, GeluKind kind) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) out[i] = gelu(x[i], kind);
}

void gelu_backward(float* dx, const float* dout, const float* x, std::int64_t n, GeluKind kind) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) dx[i] += gelu_derivative(x[i], kind) * dout[i];
}

void bias_gelu_forward(float* out, const float* x, const float* bias, std::int64_t rows,
                       std::int64_t cols, GeluKind kind) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t i = r * cols + c;
      out[i] = gelu(x[i] + bias[c], kind);
    }
  }
}

void bias_gelu_backward(float* dx, float* dbias, const float* dout, const float* x,
                        const float* bias, std::int64_t rows, std::int64_t cols, GeluKind kind) {
  if (dbias == nullptr) {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t i = r * cols + c;
        dx[i] += gelu_derivative(x[i] + bias[c], kind) * dout[i];
      }
    }
    return;
  }
  // Each element's gradient is computed once and feeds both dx and its column's bias sum. Blocks
  // of columns per thread, rows in order inside: every bias sum adds its rows in order, so it
  // does not depend on the thread count.
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t begin = blk * kBlock, end = std::min(cols, begin + kBlock);
    std::array<float, kBlock> sums{};
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = begin; c < end; ++c) {
        const std::int64_t i = r * cols + c;
        const float g = gelu_derivative(x[i] + bias[c], kind) * dout[i];
        sums[static_cast<std::size_t>(c - begin)] += g;
        dx[i] += g;
      }
    }
    for (std::int64_t c = begin; c < end; ++c)
      dbias[c] += sums[static_cast<std::size_t>(c - begin)];
  }
}

}  // namespace mds::ops::cpu
