// Device code of kernels/dropout.cu (launched from there) and its launch shapes, plain CUDA with no
// runtime includes so that tests/unit/kernels_emulated_dropout_test.cpp can compile it for the CPU
// under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and that test only;
// the kernels have internal linkage (see elementwise_kernels.cuh).
#pragma once
#include <cstdint>

#include "kernels/device_portable.cuh"
#include "kernels/philox.cuh"
#include "kernels/reduce_columns.cuh"
#include "ops/dropout.h"

namespace mds::kernels::dropout_detail {
namespace {

using detail::load;
using detail::Storage;
using detail::store;
using ops::DropoutStream;

// Calls body(i, factor) for every element, factor = scale if kept else 0; a thread takes a
// group of four elements, one Philox block.
template <typename Body>
__device__ inline void for_each_masked(std::int64_t n, DropoutStream stream, float scale,
                                       Body body) {
  const std::int64_t groups = (n + 3) / 4;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       g < groups; g += stride) {
    const detail::PhiloxWords words =
        detail::philox_block(stream.seed, stream.offset, static_cast<std::uint64_t>(g));
    const std::int64_t end = n - 4 * g < 4 ? n - 4 * g : 4;
    for (std::int64_t lane = 0; lane < end; ++lane) {
      const bool keep = detail::philox_uniform(words.w[lane]) >= stream.p;
      body(4 * g + lane, keep ? scale : 0.0f);
    }
  }
}

// Activations (out, x, residual, dx, dout) are stored as kS: widened on load, rounded on store;
// the bias (may be null) as kP, fp32 or kS, widened on load.
template <Storage kS, Storage kP>
__global__ void forward_kernel(void* out, const void* x, const void* bias, const void* residual,
                               std::int64_t n, std::int64_t cols, DropoutStream stream,
                               float scale) {
  for_each_masked(n, stream, scale, [&](std::int64_t i, float factor) {
    const float v = bias != nullptr ? load<kS>(x, i) + load<kP>(bias, i % cols) : load<kS>(x, i);
    store<kS>(out, i, residual != nullptr ? load<kS>(residual, i) + v * factor : v * factor);
  });
}

template <Storage kS>
__global__ void backward_kernel(void* dx, const void* dout, std::int64_t n, DropoutStream stream,
                                float scale, bool accumulate) {
  for_each_masked(n, stream, scale, [&](std::int64_t i, float factor) {
    const float g = load<kS>(dout, i);
    store<kS>(dx, i, accumulate ? load<kS>(dx, i) + g * factor : g * factor);
  });
}

template <Storage kS>
__global__ void bias_grad_kernel(const void* dout, std::int64_t rows, std::int64_t cols,
                                 DropoutStream stream, float scale, float* partials) {
  detail::sum_columns<1>(
      rows, cols,
      [&](std::int64_t, std::int64_t, std::int64_t i, float* sums) {
        const auto index = static_cast<std::uint64_t>(i);
        const detail::PhiloxWords words =
            detail::philox_block(stream.seed, stream.offset, index / 4);
        if (detail::philox_uniform(words.w[index % 4]) >= stream.p)
          sums[0] += load<kS>(dout, i) * scale;
      },
      partials);
}

// The factor of a kept element, as the CPU: 1/(1 − p) in double, rounded once.
inline float keep_scale(const DropoutStream& stream) {
  return static_cast<float>(1.0 / (1.0 - static_cast<double>(stream.p)));
}

// forward_kernel and backward_kernel: a grid-stride loop over the groups of four elements.
inline detail::LaunchShape groups_shape(std::int64_t n) {
  return detail::grid_stride_shape((n + 3) / 4);
}

}  // namespace
}  // namespace mds::kernels::dropout_detail
