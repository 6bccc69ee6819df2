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
MDS_ALWAYS_INLINE inline float gelu_of(float z) {
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
MDS_ALWAYS_INLINE inline float gelu_derivative_of(float z) {
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
MDS_ALWAYS_INLINE inline void with_kind(GeluKind kind, Body body) {
  switch (kind) {
    case GeluKind::kTanhFused:
      return body(std::integral_constant<GeluKind, GeluKind::kTanhFused>{});
    case GeluKind::kTanhOpenAI:
      return body(std::integral_constant<GeluKind, GeluKind::kTanhOpenAI>{});
    case GeluKind::kErf:
      return body(std::integral_constant<GeluKind, GeluKind::kErf>{});
  }
}

// One row (or one block of columns) per call, each cloned for AVX2 with the kind switched outside
// the loops.
MDS_VECTOR_CLONES void forward_row(float* out, const float* x, const float* bias, std::int64_t cols,
                                   GeluKind kind) {
  with_kind(kind, [&](auto k) MDS_ALWAYS_INLINE {
    for (std::int64_t c = 0; c < cols; ++c) {
      out[c] = gelu_of<decltype(k)::value>(bias != nullptr ? x[c] + bias[c] : x[c]);
    }
  });
}

MDS_VECTOR_CLONES void backward_row(float* dx, const float* dout, const float* x, const float* bias,
                                    std::int64_t cols, GeluKind kind) {
  with_kind(kind, [&](auto k) MDS_ALWAYS_INLINE {
    for (std::int64_t c = 0; c < cols; ++c) {
      dx[c] +=
          gelu_derivative_of<decltype(k)::value>(bias != nullptr ? x[c] + bias[c] : x[c]) * dout[c];
    }
  });
}

// Columns [begin, end) of every row: dx += g and sums[c − begin] += g, rows in order.
MDS_VECTOR_CLONES void backward_block(float* dx, float* sums, const float* dout, const float* x,
                                      const float* bias, std::int64_t rows, std::int64_t cols,
                                      std::int64_t begin, std::int64_t end, GeluKind kind) {
  with_kind(kind, [&](auto k) MDS_ALWAYS_INLINE {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = begin; c < end; ++c) {
        const std::int64_t i = r * cols + c;
        const float z = bias != nullptr ? x[i] + bias[c] : x[i];
        const float g = gelu_derivative_of<decltype(k)::value>(z) * dout[i];
        sums[c - begin] += g;
        dx[i] += g;
      }
    }
  });
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

// Elementwise forms run as one long "row" split into chunks over the threads.
constexpr std::int64_t kElementChunk = 4096;

void gelu_forward(float* out, const float* x, std::int64_t n, GeluKind kind) {
  const std::int64_t chunks = (n + kElementChunk - 1) / kElementChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t begin = chunk * kElementChunk;
    forward_row(out + begin, x + begin, nullptr, std::min(kElementChunk, n - begin), kind);
  }
}

void gelu_backward(float* dx, const float* dout, const float* x, std::int64_t n, GeluKind kind) {
  const std::int64_t chunks = (n + kElementChunk - 1) / kElementChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t begin = chunk * kElementChunk;
    backward_row(dx + begin, dout + begin, x + begin, nullptr, std::min(kElementChunk, n - begin),
                 kind);
  }
}

void bias_gelu_forward(float* out, const float* x, const float* bias, std::int64_t rows,
                       std::int64_t cols, GeluKind kind) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    forward_row(out + r * cols, x + r * cols, bias, cols, kind);
  }
}

void bias_gelu_backward(float* dx, float* dbias, const float* dout, const float* x,
                        const float* bias, std::int64_t rows, std::int64_t cols, GeluKind kind) {
  if (dbias == nullptr) {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      backward_row(dx + r * cols, dout + r * cols, x + r * cols, bias, cols, kind);
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
    backward_block(dx, sums.data(), dout, x, bias, rows, cols, begin, end, kind);
    for (std::int64_t c = begin; c < end; ++c)
      dbias[c] += sums[static_cast<std::size_t>(c - begin)];
  }
}

}  // namespace mds::ops::cpu
