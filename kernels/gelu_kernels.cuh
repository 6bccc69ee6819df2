// Device code of kernels/gelu.cu (launched from there) and its launch shapes, plain CUDA with no
// runtime includes so that tests/unit/kernels_emulated_gelu_test.cpp can compile it for the CPU
// under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and that test only;
// the kernels have internal linkage (see elementwise_kernels.cuh).
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/device_portable.cuh"
#include "kernels/reduce_columns.cuh"
#include "ops/gelu.h"

namespace mds::kernels::gelu_detail {
namespace {

using detail::load;
using detail::load8;
using detail::Storage;
using detail::store;
using detail::store8;
using ops::GeluKind;

// The expressions of ops/cpu/gelu.cpp, term by term (nvcc's FMA contraction is off for this
// library, so each operation rounds as on the CPU).
template <GeluKind kKind>
__device__ inline float gelu_of(float z) {
  if constexpr (kKind == GeluKind::kTanhFused) {
    return z * 0.5f * (1.0f + tanhf(0.79788456f * z * (1.0f + 0.044715f * z * z)));
  } else if constexpr (kKind == GeluKind::kTanhOpenAI) {
    return 0.5f * z * (1.0f + tanhf(0.7978845608028654f * z * (1.0f + 0.044715f * z * z)));
  } else {
    return z * 0.5f * (1.0f + erff(z * 0.70710678118654752f));
  }
}

template <GeluKind kKind>
__device__ inline float gelu_derivative_of(float z) {
  if constexpr (kKind == GeluKind::kTanhFused) {
    const float t = tanhf(0.79788456f * z * (1.0f + 0.044715f * z * z));
    return 0.5f * z * ((1.0f - t * t) * (0.79788456f + 0.1070322243f * z * z)) + 0.5f * (1.0f + t);
  } else if constexpr (kKind == GeluKind::kTanhOpenAI) {
    const float c = 0.7978845608028654f;
    const float t = tanhf(c * z * (1.0f + 0.044715f * z * z));
    return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * z * z);
  } else {
    return 0.5f * (1.0f + erff(z * 0.70710678118654752f)) +
           z * 0.3989422804014327f * expf(-0.5f * z * z);
  }
}

// Activations (out, x, dx, dout) are stored as kS, widened on load and rounded on store; bias is
// stored as kP (fp32 or kS, widened on load) and may be null (then cols is unused).
template <Storage kS, Storage kP, GeluKind kKind>
__global__ void forward_kernel(void* out, const void* x, const void* bias, std::int64_t n,
                               std::int64_t cols) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float z = load<kS>(x, i);
    store<kS>(out, i, gelu_of<kKind>(bias != nullptr ? z + load<kP>(bias, i % cols) : z));
  }
}

// forward_kernel eight elements at a time (load8/store8): n a multiple of 8, cols too when there
// is a bias (a chunk then lies within one row), every pointer 16-byte aligned. The same arithmetic
// per element, so the same bits.
template <Storage kS, Storage kP, GeluKind kKind>
__global__ void forward8_kernel(void* out, const void* x, const void* bias, std::int64_t n,
                                std::int64_t cols) {
  const std::int64_t chunks = n / 8;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       k < chunks; k += stride) {
    float z[8];
    detail::load8_plus_bias<kS, kP>(x, bias, k, cols, z);
    for (int j = 0; j < 8; ++j) z[j] = gelu_of<kKind>(z[j]);
    store8<kS>(out, 8 * k, z);
  }
}

// dx += g, or dx = g when !accumulate (dx not read).
template <Storage kS, Storage kP, GeluKind kKind>
__global__ void backward_kernel(void* dx, const void* dout, const void* x, const void* bias,
                                std::int64_t n, std::int64_t cols, bool accumulate) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float z = load<kS>(x, i);
    const float g = gelu_derivative_of<kKind>(bias != nullptr ? z + load<kP>(bias, i % cols) : z) *
                    load<kS>(dout, i);
    store<kS>(dx, i, accumulate ? load<kS>(dx, i) + g : g);
  }
}

// Each element's gradient once (in fp32), feeding dx (+= or, when !accumulate, =) and its column's
// sum, as the CPU's backward_block. The rows of sum_columns (its launch shape, its order of
// summation), taken four at a time: every load of the four rows is issued before their stores,
// which the compiler could not do itself (dx might alias x or dout, as far as it knows), so four
// rows' loads are in flight instead of one.
template <Storage kS, Storage kP, GeluKind kKind>
__global__ void backward_bias_kernel(void* dx, const void* dout, const void* x, const void* bias,
                                     std::int64_t rows, std::int64_t cols, bool accumulate,
                                     detail::ColumnSink<1> sink) {
  constexpr int kGroup = 4;
  constexpr std::int64_t kStep = detail::kRowLanes;
  const auto [c, first, end] = detail::column_block(rows);
  float sums[1] = {};
  if (c < cols) {
    const float b = bias != nullptr ? load<kP>(bias, c) : 0.0f;  // x + 0 is x, bit for bit
    for (std::int64_t r0 = first + threadIdx.y; r0 < end; r0 += kGroup * kStep) {
      float z[kGroup] = {}, d[kGroup] = {}, old[kGroup] = {};
      for (int t = 0; t < kGroup; ++t) {
        const std::int64_t r = r0 + t * kStep;
        if (r >= end) break;
        const std::int64_t i = r * cols + c;
        z[t] = load<kS>(x, i) + b;
        d[t] = load<kS>(dout, i);
        if (accumulate) old[t] = load<kS>(dx, i);
      }
      for (int t = 0; t < kGroup; ++t) {
        const std::int64_t r = r0 + t * kStep;
        if (r >= end) break;
        const float g = gelu_derivative_of<kKind>(z[t]) * d[t];
        sums[0] += g;
        store<kS>(dx, r * cols + c, accumulate ? old[t] + g : g);
      }
    }
  }
  detail::store_column_partials<1>(sums, c, cols, sink);
}

// backward_bias_kernel eight columns a thread (sum_columns8): 16-byte loads of x, dout (and dx),
// a 16-byte store of dx, the same arithmetic per element and each column's rows summed in the
// same order, so the same bits. cols % 8 == 0 and 16-byte aligned arrays (fits_columns8). One
// row at a time: on an H100, GPT-2 124M's [8192, 3072] took 0.771 ms a micro-batch this way and
// 0.796 with two rows' loads issued before their stores (held to three blocks an SM); groups of
// four took up to 166 registers a thread.
template <Storage kS, Storage kP, GeluKind kKind>
__global__ void backward_bias8_kernel(void* dx, const void* dout, const void* x, const void* bias,
                                      std::int64_t rows, std::int64_t cols, bool accumulate,
                                      detail::ColumnSink<1> sink) {
  struct Row {
    detail::Raw8<kS> x, dout, dx;
  };
  detail::sum_columns8<1, 1>(
      rows, cols,
      [&](std::int64_t, std::int64_t i) {
        Row row{};
        row.x = detail::load_raw8<kS>(x, i);
        row.dout = detail::load_raw8<kS>(dout, i);
        if (accumulate) row.dx = detail::load_raw8<kS>(dx, i);
        return row;
      },
      [&](std::int64_t r, std::int64_t i, const Row& row, float(&sums)[1][8]) {
        float z[8], b[8], d[8], old[8] = {};
        detail::widen8<kS>(row.x, z);
        if (bias != nullptr) {
          load8<kP>(bias, i - r * cols, b);
        } else {
          for (float& v : b) v = 0.0f;
        }
        detail::widen8<kS>(row.dout, d);
        if (accumulate) detail::widen8<kS>(row.dx, old);
        for (int j = 0; j < 8; ++j) {
          const float g = gelu_derivative_of<kKind>(z[j] + b[j]) * d[j];
          sums[0][j] += g;
          old[j] = accumulate ? old[j] + g : g;
        }
        store8<kS>(dx, i, old);
      },
      sink);
}

// launch(kernel, shape) with the backward-with-bias kernel for these cols and arrays.
template <Storage kS, Storage kP, GeluKind kKind, typename Launch>
void with_backward_bias_kernel(std::int64_t rows, std::int64_t cols,
                               std::initializer_list<const void*> arrays, Launch launch) {
  if (detail::fits_columns8(cols, arrays)) {
    launch(backward_bias8_kernel<kS, kP, kKind>, detail::column8_shape(rows, cols));
  } else {
    launch(backward_bias_kernel<kS, kP, kKind>, detail::column_shape(rows, cols));
  }
}

// forward_kernel and backward_kernel: a grid-stride loop over the n elements.
inline detail::LaunchShape elementwise_shape(std::int64_t n) {
  return detail::grid_stride_shape(n);
}

// Calls body(kind as a compile-time constant).
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
}  // namespace mds::kernels::gelu_detail
