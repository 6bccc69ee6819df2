// Device code of kernels/dropout.cu (launched from there) and its launch shapes, plain CUDA with no
// runtime includes so that tests/unit/kernels_emulated_dropout_test.cpp can compile it for the CPU
// under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and that test only;
// the kernels have internal linkage (see elementwise_kernels.cuh).
#pragma once
#include <cstdint>

#include "kernels/device_portable.cuh"
#include "kernels/lane_transpose.cuh"
#include "kernels/philox.cuh"
#include "kernels/reduce_columns.cuh"
#include "ops/dropout.h"

namespace mds::kernels::dropout_detail {
namespace {

using detail::load;
using detail::load8;
using detail::Storage;
using detail::store;
using detail::store8;
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

// The factors of elements [8k, 8k + 8): Philox blocks 2k and 2k + 1, as for_each_masked draws them.
__device__ inline void chunk_factors(float (&factor)[8], const DropoutStream& stream, float scale,
                                     std::int64_t k) {
  for (int half = 0; half < 2; ++half) {
    const detail::PhiloxWords words =
        detail::philox_block(stream.seed, stream.offset, static_cast<std::uint64_t>(2 * k + half));
    for (int lane = 0; lane < 4; ++lane) {
      factor[4 * half + lane] = detail::philox_uniform(words.w[lane]) >= stream.p ? scale : 0.0f;
    }
  }
}

// Calls body(k, factors) for every chunk of eight elements (n a multiple of 8): the kernels below
// eight elements a thread, for load8/store8.
template <typename Body>
__device__ inline void for_each_masked_chunk(std::int64_t n, DropoutStream stream, float scale,
                                             Body body) {
  const std::int64_t chunks = n / 8;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       k < chunks; k += stride) {
    float factor[8];
    chunk_factors(factor, stream, scale, k);
    body(k, factor);
  }
}

// A chunk's dbias terms: each kept element's g·scale added (a dropped one adds nothing).
__device__ inline void add_kept_terms(float (&sums)[8], const float (&factor)[8],
                                      const float (&g)[8], float scale) {
  for (int j = 0; j < 8; ++j) {
    if (factor[j] != 0.0f) sums[j] += g[j] * scale;
  }
}

// A chunk's dx: dx + g·factor when accumulating (`dx` holds the old values), g·factor otherwise.
__device__ inline void masked_gradient(float (&dx)[8], const float (&g)[8],
                                       const float (&factor)[8], bool accumulate) {
  for (int j = 0; j < 8; ++j) dx[j] = accumulate ? dx[j] + g[j] * factor[j] : g[j] * factor[j];
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

// forward_kernel and backward_kernel eight elements a thread: the same arithmetic per element (so
// the same bits) where n (and cols, with a bias) is a multiple of 8 and every pointer is 16-byte
// aligned (detail::fits_chunks_of_8).
template <Storage kS, Storage kP>
__global__ void forward8_kernel(void* out, const void* x, const void* bias, const void* residual,
                                std::int64_t n, std::int64_t cols, DropoutStream stream,
                                float scale) {
  for_each_masked_chunk(n, stream, scale, [&](std::int64_t k, const float(&factor)[8]) {
    float v[8];
    detail::load8_plus_bias<kS, kP>(x, bias, k, cols, v);
    float r[8] = {};
    if (residual != nullptr) load8<kS>(residual, 8 * k, r);
    for (int j = 0; j < 8; ++j)
      v[j] = residual != nullptr ? r[j] + v[j] * factor[j] : v[j] * factor[j];
    store8<kS>(out, 8 * k, v);
  });
}

template <Storage kS>
__global__ void backward8_kernel(void* dx, const void* dout, std::int64_t n, DropoutStream stream,
                                 float scale, bool accumulate) {
  for_each_masked_chunk(n, stream, scale, [&](std::int64_t k, const float(&factor)[8]) {
    float g[8], out[8] = {};
    load8<kS>(dout, 8 * k, g);
    if (accumulate) load8<kS>(dx, 8 * k, out);
    masked_gradient(out, g, factor, accumulate);
    store8<kS>(dx, 8 * k, out);
  });
}

template <Storage kS>
__global__ void bias_grad_kernel(const void* dout, std::int64_t rows, std::int64_t cols,
                                 DropoutStream stream, float scale, detail::ColumnSink<1> sink) {
  detail::sum_columns<1>(
      rows, cols,
      [&](std::int64_t, std::int64_t, std::int64_t i, float* sums) {
        const auto index = static_cast<std::uint64_t>(i);
        const detail::PhiloxWords words =
            detail::philox_block(stream.seed, stream.offset, index / 4);
        if (detail::philox_uniform(words.w[index % 4]) >= stream.p)
          sums[0] += load<kS>(dout, i) * scale;
      },
      sink);
}

// bias_grad_kernel with each Philox block drawn once instead of four times (cols a multiple of
// 4, so the four lanes 4m … 4m + 3 of a warp hold the four columns of one block in every row):
// the rows of a thread (its row lane y: y, y + 8, …) go in groups of four; lane j of the four
// draws the block of the group's row j and a transpose hands each lane its column's factor in
// all four rows. The same terms added in the same order as bias_grad_kernel: the same bits. Every
// lane runs the loop (the shuffles need the whole warp); lanes past cols or rows past the chunk
// add nothing.
template <Storage kS>
__global__ void bias_grad_shared_kernel(const void* dout, std::int64_t rows, std::int64_t cols,
                                        DropoutStream stream, float scale,
                                        detail::ColumnSink<1> sink) {
  constexpr int kGroup = 4;
  const auto [c, first, end] = detail::column_block(rows);
  const int j = static_cast<int>(threadIdx.x) % kGroup;
  float sums[1] = {};
  for (std::int64_t r0 = first + threadIdx.y; r0 < end; r0 += kGroup * detail::kRowLanes) {
    const std::int64_t drawn_row = r0 + j * detail::kRowLanes;
    const detail::PhiloxWords words = detail::philox_block(
        stream.seed, stream.offset, static_cast<std::uint64_t>(drawn_row * cols + c - j) / 4);
    float drawn[kGroup], factor[kGroup];
    for (int k = 0; k < kGroup; ++k) {
      drawn[k] = detail::philox_uniform(words.w[k]) >= stream.p ? scale : 0.0f;
    }
    detail::transpose4(factor, drawn, j, 1, 2);  // factor[t]: row r0 + 8t, column c
    for (int t = 0; t < kGroup; ++t) {
      const std::int64_t r = r0 + t * detail::kRowLanes;
      if (c < cols && r < end && factor[t] != 0.0f) sums[0] += load<kS>(dout, r * cols + c) * scale;
    }
  }
  detail::store_column_partials<1>(sums, c, cols, sink);
}

// bias_grad_kernel eight columns a thread (sum_columns8, cols a multiple of 8 and dout 16-byte
// aligned): a thread's eight elements of a row are one chunk, two Philox blocks drawn once each,
// loaded 16 bytes at a time; the same kept terms added in the same order: the same bits.
template <Storage kS, std::int64_t kChunkRows = detail::kRowChunk>
__global__ void bias_grad8_kernel(const void* dout, std::int64_t rows, std::int64_t cols,
                                  DropoutStream stream, float scale, detail::ColumnSink<1> sink) {
  detail::sum_columns8<1, 8, kChunkRows>(
      rows, cols, [&](std::int64_t, std::int64_t i) { return detail::load_raw8<kS>(dout, i); },
      [&](std::int64_t, std::int64_t i, const detail::Raw8<kS>& loaded, float(&sums)[1][8]) {
        float factor[8], g[8];
        chunk_factors(factor, stream, scale, i / 8);
        detail::widen8<kS>(loaded, g);
        add_kept_terms(sums[0], factor, g, scale);
      },
      sink);
}

// Rows a block of bias_dropout_add_backward8_kernel takes: each row costs two Philox blocks a
// thread, and 256-row chunks gave a [8192, 768] gradient 96 blocks, under one per SM.
constexpr std::int64_t kBackwardChunkRows = 64;

// bias-dropout-add's backward in one pass over dout, where bias_grad8_kernel fits (and dx,
// dresidual are 16-byte aligned too): the dbias partials of bias_grad8_kernel<kS,
// kBackwardChunkRows>, dresidual += dout as add_kernel adds (dresidual may be null), then dx as
// backward8_kernel writes it (dx may be dout's memory). Each Philox block is drawn once instead
// of once for dbias and again for dx, and dout is read once.
template <Storage kS>
__global__ void bias_dropout_add_backward8_kernel(void* dx, void* dresidual, const void* dout,
                                                  std::int64_t rows, std::int64_t cols,
                                                  DropoutStream stream, float scale,
                                                  bool accumulate, detail::ColumnSink<1> sink) {
  struct Row {
    detail::Raw8<kS> dout, dx, dresidual;
  };
  detail::sum_columns8<1, 4, kBackwardChunkRows>(
      rows, cols,
      [&](std::int64_t, std::int64_t i) {
        Row row{};
        row.dout = detail::load_raw8<kS>(dout, i);
        if (accumulate) row.dx = detail::load_raw8<kS>(dx, i);
        if (dresidual != nullptr) row.dresidual = detail::load_raw8<kS>(dresidual, i);
        return row;
      },
      [&](std::int64_t, std::int64_t i, const Row& row, float(&sums)[1][8]) {
        float factor[8], g[8];
        chunk_factors(factor, stream, scale, i / 8);
        detail::widen8<kS>(row.dout, g);
        add_kept_terms(sums[0], factor, g, scale);
        if (dresidual != nullptr) {
          float sum[8];
          detail::widen8<kS>(row.dresidual, sum);
          for (int j = 0; j < 8; ++j) sum[j] = sum[j] + g[j];
          store8<kS>(dresidual, i, sum);
        }
        float out[8] = {};
        if (accumulate) detail::widen8<kS>(row.dx, out);
        masked_gradient(out, g, factor, accumulate);
        store8<kS>(dx, i, out);
      },
      sink);
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
