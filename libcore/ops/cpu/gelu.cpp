#include "ops/cpu/gelu.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "ops/cpu/vector_math.h"

namespace mds::ops::cpu {

namespace {

// The expressions keep upstream's operation order (torch evaluates left to right in fp32); tanh is
// vector_tanh (within 2^-23 of tanh, vectorizable), which PyTorch's own vectorized tanh is not
// bit-equal to either.
template <GeluKind kKind>
float gelu_of(float z) {
  if constexpr (kKind == GeluKind::kTanhFused) {
    return z * 0.5f * (1.0f + vector_tanh(0.79788456f * z * (1.0f + 0.044715f * z * z)));
  } else if constexpr (kKind == GeluKind::kTanhOpenAI) {
    // megatron/model/utils.py openai_gelu / gelu_impl.
    return 0.5f * z * (1.0f + vector_tanh(0.7978845608028654f * z * (1.0f + 0.044715f * z * z)));
  } else {
    return z * 0.5f * (1.0f + std::erf(z * 0.70710678118654752f));
  }
}

template <GeluKind kKind>
float gelu_derivative_of(float z) {
  if constexpr (kKind == GeluKind::kTanhFused) {
    // megatron/model/fused_bias_gelu.py bias_gelu_back, 0.1070322243 = 3·0.044715·0.79788456.
    const float t = vector_tanh(0.79788456f * z * (1.0f + 0.044715f * z * z));
    return 0.5f * z * ((1.0f - t * t) * (0.79788456f + 0.1070322243f * z * z)) + 0.5f * (1.0f + t);
  } else if constexpr (kKind == GeluKind::kTanhOpenAI) {
    const float c = 0.7978845608028654f;
    const float t = vector_tanh(c * z * (1.0f + 0.044715f * z * z));
    return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * z * z);
  } else {
    // 0.3989422804 = 1/sqrt(2π).
    return 0.5f * (1.0f + std::erf(z * 0.70710678118654752f)) +
           z * 0.3989422804014327f * std::exp(-0.5f * z * z);
  }
}

// Calls body(kind as a compile-time constant), so that every loop is compiled once per kind with
// no switch inside it (a switch in the loop body keeps it from vectorizing).
template <typename Body>
void with_kind(GeluKind kind, Body body) {
  switch (kind) {
    case GeluKind::kTanhFused:
      return body(std::integral_constant<GeluKind, GeluKind::kTanhFused>{});
    case GeluKind::kTanhOpenAI:
      return body(std::integral_constant<GeluKind, GeluKind::kTanhOpenAI>{});
    case GeluKind::kErf:
      return body(std::integral_constant<GeluKind, GeluKind::kErf>{});
  }
}

}  // namespace

float gelu(float z, GeluKind kind) {
  float result = 0.0f;
  with_kind(kind, [&](auto k) { result = gelu_of<decltype(k)::value>(z); });
  return result;
}

float gelu_derivative(float z, GeluKind kind) {
  float result = 0.0f;
  with_kind(kind, [&](auto k) { result = gelu_derivative_of<decltype(k)::value>(z); });
  return result;
}

void gelu_forward(float* out, const float* x, std::int64_t n, GeluKind kind) {
  with_kind(kind, [&](auto k) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) out[i] = gelu_of<decltype(k)::value>(x[i]);
  });
}

void gelu_backward(float* dx, const float* dout, const float* x, std::int64_t n, GeluKind kind) {
  with_kind(kind, [&](auto k) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      dx[i] += gelu_derivative_of<decltype(k)::value>(x[i]) * dout[i];
  });
}

void bias_gelu_forward(float* out, const float* x, const float* bias, std::int64_t rows,
                       std::int64_t cols, GeluKind kind) {
  with_kind(kind, [&](auto k) {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t i = r * cols + c;
        out[i] = gelu_of<decltype(k)::value>(x[i] + bias[c]);
      }
    }
  });
}

void bias_gelu_backward(float* dx, float* dbias, const float* dout, const float* x,
                        const float* bias, std::int64_t rows, std::int64_t cols, GeluKind kind) {
  if (dbias == nullptr) {
    with_kind(kind, [&](auto k) {
#pragma omp parallel for schedule(static)
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          const std::int64_t i = r * cols + c;
          dx[i] += gelu_derivative_of<decltype(k)::value>(x[i] + bias[c]) * dout[i];
        }
      }
    });
    return;
  }
  // Each element's gradient is computed once and feeds both dx and its column's bias sum. Blocks
  // of columns per thread, rows in order inside: every bias sum adds its rows in order, so it
  // does not depend on the thread count.
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (cols + kBlock - 1) / kBlock;
  with_kind(kind, [&](auto k) {
#pragma omp parallel for schedule(static)
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
      const std::int64_t begin = blk * kBlock, end = std::min(cols, begin + kBlock);
      std::array<float, kBlock> sums{};
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = begin; c < end; ++c) {
          const std::int64_t i = r * cols + c;
          const float g = gelu_derivative_of<decltype(k)::value>(x[i] + bias[c]) * dout[i];
          sums[static_cast<std::size_t>(c - begin)] += g;
          dx[i] += g;
        }
      }
      for (std::int64_t c = begin; c < end; ++c)
        dbias[c] += sums[static_cast<std::size_t>(c - begin)];
    }
  });
}

}  // namespace mds::ops::cpu
