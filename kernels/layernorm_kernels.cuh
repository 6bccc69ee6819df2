// Device code of kernels/layernorm.cu (launched from there) and its launch shapes, plain CUDA with
// no runtime includes so that tests/unit/kernels_emulated_layernorm_test.cpp can compile it for
// the CPU under the SIMT emulation (tests/unit/simt_emulation.h). Included by that .cu and that
// test only; the kernels have internal linkage (see elementwise_kernels.cuh).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/device_portable.cuh"
#include "kernels/reduce_columns.cuh"

namespace mds::kernels::layernorm_detail {
namespace {

using detail::block_sum;
using detail::kThreads;
using detail::kWarps;
using detail::load;
using detail::load8;
using detail::Storage;
using detail::store;
using detail::store8;

// Activations (out, x, residual, sum_out, dx, dout) are stored as kS: widened on load, rounded on
// store; weight and bias as kP (fp32, or kS: widened on load, so 16-bit parameters give the bits
// of their fp32 widening); mean and rstd are fp32. With kResidual, the row normalized is x +
// residual, written to sum_out first and re-read from there (rounded to kS, as the CPU's add then
// layernorm_forward; each thread re-reads only the elements it wrote itself, so no barrier is
// needed, and sum_out may alias x or residual).
template <Storage kS, Storage kP, bool kResidual>
__global__ void forward_kernel(void* out, float* mean, float* rstd, void* sum_out, const void* x,
                               const void* residual, const void* weight, const void* bias,
                               std::int64_t rows, std::int64_t cols, float eps) {
  __shared__ float scratch[kWarps];
  if (blockIdx.x >= rows) return;  // the grid has one block per row
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * cols;
  const void* row = x;
  if constexpr (kResidual) {
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      store<kS>(sum_out, first + c, load<kS>(x, first + c) + load<kS>(residual, first + c));
    row = sum_out;
  }
  float sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) sum += load<kS>(row, first + c);
  const float m = block_sum(sum, scratch) / static_cast<float>(cols);
  float sq = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float d = load<kS>(row, first + c) - m;
    sq += d * d;
  }
  const float var = block_sum(sq, scratch) / static_cast<float>(cols);
  const float s = 1.0f / sqrtf(var + eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
    store<kS>(out, first + c,
              (load<kS>(row, first + c) - m) * s * load<kP>(weight, c) + load<kP>(bias, c));
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = m;
    rstd[blockIdx.x] = s;
  }
}

template <Storage kS, Storage kP>
__global__ void backward_dx_kernel(void* dx, const void* dout, const void* x, const void* weight,
                                   const float* mean, const float* rstd, std::int64_t rows,
                                   std::int64_t cols) {
  __shared__ float scratch[kWarps];
  if (blockIdx.x >= rows) return;  // the grid has one block per row
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * cols;
  const float m = mean[blockIdx.x], s = rstd[blockIdx.x];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const float g = load<kS>(dout, first + c) * load<kP>(weight, c);
    g_sum += g;
    gx_sum += g * ((load<kS>(x, first + c) - m) * s);
  }
  const float g_mean = block_sum(g_sum, scratch) / static_cast<float>(cols);
  const float gx_mean = block_sum(gx_sum, scratch) / static_cast<float>(cols);
  for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
    const std::int64_t i = first + c;
    const float xhat = (load<kS>(x, i) - m) * s;
    store<kS>(
        dx, i,
        load<kS>(dx, i) + s * (load<kS>(dout, i) * load<kP>(weight, c) - g_mean - xhat * gx_mean));
  }
}

// Rows a block of the parameter gradients sums: with 256, a [8192, 768] gradient gave 96 blocks,
// fewer than an H100's 132 SMs, each waiting on its loads (27 µs a call in session 15's profile,
// for 25 MB).
constexpr std::int64_t kParamsChunkRows = 64;

// dweight and dbias partials: one column a thread (sum_columns), or with kBy8 eight columns a
// thread with 16-byte loads of dout and x (sum_columns8, the same bits); kParamsChunkRows rows a
// block.
template <Storage kS, bool kBy8>
__global__ void backward_params_kernel(const void* dout, const void* x, const float* mean,
                                       const float* rstd, std::int64_t rows, std::int64_t cols,
                                       detail::ColumnSink<2> sink) {
  if constexpr (kBy8) {
    struct Row {
      detail::Raw8<kS> dout, x;
      float mean, rstd;
    };
    detail::sum_columns8<2, 4, kParamsChunkRows>(
        rows, cols,
        [&](std::int64_t r, std::int64_t i) {
          return Row{detail::load_raw8<kS>(dout, i), detail::load_raw8<kS>(x, i), mean[r], rstd[r]};
        },
        [&](std::int64_t, std::int64_t, const Row& row, float(&sums)[2][8]) {
          float g[8], v[8];
          detail::widen8<kS>(row.dout, g);
          detail::widen8<kS>(row.x, v);
          const float m = row.mean, s = row.rstd;
          for (int j = 0; j < 8; ++j) {
            sums[0][j] += g[j] * ((v[j] - m) * s);
            sums[1][j] += g[j];
          }
        },
        sink);
  } else {
    detail::sum_columns<2, kParamsChunkRows>(
        rows, cols,
        [&](std::int64_t r, std::int64_t, std::int64_t i, float* sums) {
          const float g = load<kS>(dout, i);
          sums[0] += g * ((load<kS>(x, i) - mean[r]) * rstd[r]);
          sums[1] += g;
        },
        sink);
  }
}

// launch(kernel, shape) with the parameter-gradient kernel for these cols and arrays.
template <Storage kS, typename Launch>
void with_backward_params_kernel(std::int64_t rows, std::int64_t cols,
                                 std::initializer_list<const void*> arrays, Launch launch) {
  if (detail::fits_columns8(cols, arrays)) {
    launch(backward_params_kernel<kS, true>, detail::column8_shape(rows, cols, kParamsChunkRows));
  } else {
    launch(backward_params_kernel<kS, false>, detail::column_shape(rows, cols, kParamsChunkRows));
  }
}

// ---- one warp per row -----------------------------------------------------------------------
// For rows of up to 32·8·kChunks elements, a multiple of 8, with 16-byte aligned arrays: each lane
// keeps chunks lane, lane + 32, … of eight elements in registers, loaded and stored 16 bytes at a
// time, and the row's sums are warp butterflies: no barrier, eight rows per block in flight, each
// element read once. The same arithmetic per element as the block kernels above; only the
// summation order differs.

// The row of this warp (kWarps rows per block), or −1 past the end (the whole warp returns).
__device__ inline std::int64_t warp_row(std::int64_t rows) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  return row < rows ? row : -1;
}

// What a store then a load as kS gives back: the 16-bit rounding, or the value itself.
template <Storage kS>
__device__ inline float stored_value(float value) {
  if constexpr (kS == Storage::kF32) {
    return value;
  } else {
    return detail::widen_bits<kS>(detail::round_bits<kS>(value));
  }
}

template <Storage kS, Storage kP, bool kResidual, int kChunks>
__global__ void forward_warp_kernel(void* out, float* mean, float* rstd, void* sum_out,
                                    const void* x, const void* residual, const void* weight,
                                    const void* bias, std::int64_t rows, std::int64_t cols,
                                    float eps) {
  const std::int64_t row = warp_row(rows);
  if (row < 0) return;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t first = row * cols, chunks = cols / 8;
  float v[kChunks][8] = {};
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const std::int64_t k = lane + 32 * j;
    if (k >= chunks) break;
    load8<kS>(x, first + 8 * k, v[j]);
    if constexpr (kResidual) {
      float r[8];
      load8<kS>(residual, first + 8 * k, r);
      for (int e = 0; e < 8; ++e) v[j][e] = v[j][e] + r[e];
      store8<kS>(sum_out, first + 8 * k, v[j]);
      for (int e = 0; e < 8; ++e) v[j][e] = stored_value<kS>(v[j][e]);
    }
    for (int e = 0; e < 8; ++e) sum += v[j][e];
  }
  const float m = detail::warp_sum(sum) / static_cast<float>(cols);
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    if (lane + 32 * j >= chunks) break;
    for (int e = 0; e < 8; ++e) {
      const float d = v[j][e] - m;
      sq += d * d;
    }
  }
  const float var = detail::warp_sum(sq) / static_cast<float>(cols);
  const float s = 1.0f / sqrtf(var + eps);
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const std::int64_t k = lane + 32 * j;
    if (k >= chunks) break;
    float w[8], b[8];
    load8<kP>(weight, 8 * k, w);
    load8<kP>(bias, 8 * k, b);
    for (int e = 0; e < 8; ++e) v[j][e] = (v[j][e] - m) * s * w[e] + b[e];
    store8<kS>(out, first + 8 * k, v[j]);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// One row of the backward's dx for this lane's chunks (every lane of the warp calls it, the row
// starting at element `at`): dx += rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dout·weight;
// `each(j, e, dout, xhat)` sees every element's dout and x̂ as the row is read (the fused
// backward sums them; the dx kernel passes a lambda that does nothing).
template <Storage kS, Storage kP, int kChunks, typename Each>
__device__ inline void backward_warp_row(void* dx, const void* dout, const void* x,
                                         const void* weight, float m, float s, std::int64_t at,
                                         std::int64_t cols, Each each) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t chunks = cols / 8;
  float g[kChunks][8] = {}, xhat[kChunks][8] = {};  // dout·weight and the normalized x
  float g_sum = 0.0f, gx_sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const std::int64_t k = lane + 32 * j;
    if (k >= chunks) break;
    float w[8];
    load8<kS>(dout, at + 8 * k, g[j]);
    load8<kS>(x, at + 8 * k, xhat[j]);
    load8<kP>(weight, 8 * k, w);
    for (int e = 0; e < 8; ++e) {
      xhat[j][e] = (xhat[j][e] - m) * s;
      each(j, e, g[j][e], xhat[j][e]);
      g[j][e] = g[j][e] * w[e];
      g_sum += g[j][e];
      gx_sum += g[j][e] * xhat[j][e];
    }
  }
  const float g_mean = detail::warp_sum(g_sum) / static_cast<float>(cols);
  const float gx_mean = detail::warp_sum(gx_sum) / static_cast<float>(cols);
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const std::int64_t k = lane + 32 * j;
    if (k >= chunks) break;
    float d[8];
    load8<kS>(dx, at + 8 * k, d);
    for (int e = 0; e < 8; ++e) d[e] = d[e] + s * (g[j][e] - g_mean - xhat[j][e] * gx_mean);
    store8<kS>(dx, at + 8 * k, d);
  }
}

template <Storage kS, Storage kP, int kChunks>
__global__ void backward_dx_warp_kernel(void* dx, const void* dout, const void* x,
                                        const void* weight, const float* mean, const float* rstd,
                                        std::int64_t rows, std::int64_t cols) {
  const std::int64_t row = warp_row(rows);
  if (row < 0) return;
  backward_warp_row<kS, kP, kChunks>(dx, dout, x, weight, mean[row], rstd[row], row * cols, cols,
                                     [](int, int, float, float) {});
}

// ---- the backward with its parameter gradients in one pass --------------------------------------
// backward_dx_warp_kernel's rows, kFusedRows a block (warp w takes rows w, w + kWarps, … of the
// block's), each lane also summing dout·x̂ and dout over those rows for its columns; the block adds
// its warps' sums in warp order and stores them as its chunk's partials ([2][chunks][cols], chunk
// = blockIdx.x), which backward_params_finish_kernel adds onto dweight and dbias. dx has the bits
// of backward_dx_warp_kernel (the same expressions); the parameter gradients their own fixed
// order. dout and x are read once instead of a second time by backward_params_kernel. Up to
// kMaxFusedChunks chunks a lane (rows of at most 1024): the sums take as many registers again
// as the row, which at 8 chunks would spill.
constexpr std::int64_t kFusedRows = 32;
constexpr int kMaxFusedChunks = 4;
// Blocks an SM the registers must allow: two (at most 128 registers a thread) up to 3 chunks a
// lane (ptxas, sm_80 and sm_90: 56 to 128 registers, no spills), one at 4 (156 to 168 registers,
// no spills; held to two blocks it spilled 180 bytes).
template <int kChunks>
constexpr int kFusedMinBlocks = kChunks <= 3 ? 2 : 1;

template <Storage kS, Storage kP, int kChunks>
__global__ void __launch_bounds__(kThreads, kFusedMinBlocks<kChunks>)
    backward_fused_warp_kernel(void* dx, const void* dout, const void* x, const void* weight,
                               const float* mean, const float* rstd, std::int64_t rows,
                               std::int64_t cols, float* partials) {
  static_assert(kChunks >= 1 && kChunks <= kMaxFusedChunks);
  __shared__ float warp_sums[kWarps][kChunks * 256];  // one sum of the block's columns a warp
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t chunks = cols / 8;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kFusedRows;
  const std::int64_t end = first + kFusedRows < rows ? first + kFusedRows : rows;
  float dw[kChunks][8] = {}, db[kChunks][8] = {};  // this lane's columns over the warp's rows
  for (std::int64_t row = first + warp; row < end; row += kWarps) {
    backward_warp_row<kS, kP, kChunks>(dx, dout, x, weight, mean[row], rstd[row], row * cols, cols,
                                       [&](int j, int e, float g, float xhat) {
                                         dw[j][e] += g * xhat;
                                         db[j][e] += g;
                                       });
  }
#pragma unroll
  for (int sum = 0; sum < 2; ++sum) {
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const std::int64_t k = lane + 32 * j;
      if (k >= chunks) break;
      for (int e = 0; e < 8; ++e) warp_sums[warp][8 * k + e] = sum == 0 ? dw[j][e] : db[j][e];
    }
    __syncthreads();
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
      float total = warp_sums[0][c];
      for (int w = 1; w < kWarps; ++w) total += warp_sums[w][c];
      partials[(sum * static_cast<std::int64_t>(gridDim.x) + blockIdx.x) * cols + c] = total;
    }
    __syncthreads();  // before the next sum overwrites warp_sums
  }
}

// backward_params_finish_kernel's blocks: kFinishCols columns, kFinishLanes lanes over their
// chunks. Narrow, so that GPT-2's 768 columns make 96 blocks: each lane's sum is a chain of L2
// loads, and with 24 blocks of 32 columns (add_chunk_partials' tiles) a call took 10 µs on an
// H100 (session 17), 0.25 ms of a 124M micro-batch.
constexpr int kFinishCols = 8;
constexpr int kFinishLanes = kThreads / kFinishCols;

// Adds backward_fused_warp_kernel's chunk partials onto dweight and dbias (null ones skipped):
// lane y of a column the chunks y, y + kFinishLanes, … in order, then the lanes in lane order (a
// fixed order, whichever block runs it); launched with fused_finish_shape(cols).
__global__ void __launch_bounds__(kThreads)
    backward_params_finish_kernel(const float* partials, std::int64_t chunks, std::int64_t cols,
                                  detail::ColumnOutputs<2> outputs) {
  __shared__ float lanes[2][kFinishLanes][kFinishCols];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kFinishCols + threadIdx.x;
  float sums[2] = {};
  if (c < cols) {
#pragma unroll 4
    for (std::int64_t j = threadIdx.y; j < chunks; j += kFinishLanes) {
      sums[0] += __ldcg(partials + j * cols + c);
      sums[1] += __ldcg(partials + (chunks + j) * cols + c);
    }
  }
  for (int k = 0; k < 2; ++k) lanes[k][threadIdx.y][threadIdx.x] = sums[k];
  __syncthreads();
  const int k = static_cast<int>(threadIdx.y);  // lanes 0 and 1 add dweight and dbias
  if (k < 2 && c < cols && outputs.out[k] != nullptr) {
    float total = lanes[k][0][threadIdx.x];
    for (int y = 1; y < kFinishLanes; ++y) total += lanes[k][y][threadIdx.x];
    outputs.out[k][c] += total;
  }
}

// The fused backward's blocks (its chunks) and the finish's launch.
inline std::int64_t fused_chunks(std::int64_t rows) {
  return (rows + kFusedRows - 1) / kFusedRows;
}
inline detail::LaunchShape fused_shape(std::int64_t rows) {
  return {{detail::row_grid(fused_chunks(rows), "kernels::layernorm_backward")}, {kThreads}};
}
inline detail::LaunchShape fused_finish_shape(std::int64_t cols) {
  return {{static_cast<unsigned>((cols + kFinishCols - 1) / kFinishCols)},
          {kFinishCols, kFinishLanes}};
}

// Whether the fused backward serves rows the warp kernels take with `chunks` chunks a lane
// (warp_chunks' answer; 0 for the block kernels).
inline bool fused_backward_applies(int chunks) {
  return chunks >= 1 && chunks <= kMaxFusedChunks;
}

// launch(kernel, shape) with the fused backward for `chunks` (fused_backward_applies).
template <Storage kS, Storage kP, typename Launch>
void with_fused_backward_kernel(std::int64_t rows, int chunks, Launch launch) {
  switch (chunks) {
    case 1:
      return launch(backward_fused_warp_kernel<kS, kP, 1>, fused_shape(rows));
    case 2:
      return launch(backward_fused_warp_kernel<kS, kP, 2>, fused_shape(rows));
    case 3:
      return launch(backward_fused_warp_kernel<kS, kP, 3>, fused_shape(rows));
    case 4:
      return launch(backward_fused_warp_kernel<kS, kP, 4>, fused_shape(rows));
    default:
      base::fail("kernels::layernorm_backward: no fused kernel for ", chunks, " chunks a lane");
  }
}

// ---- which kernel, with which launch ------------------------------------------------------------

// Chunks of eight per lane for the warp kernels (1 to 4, or 8), or 0 where they do not apply
// (cols not a multiple of 8 or above 2048, or an array not 16-byte aligned): the block kernels.
inline int warp_chunks(std::int64_t cols, std::initializer_list<const void*> arrays) {
  if (!detail::fits_chunks_of_8(cols, cols, nullptr, arrays) || cols > 32 * 8 * 8) return 0;
  const std::int64_t per_lane = (cols / 8 + 31) / 32;
  return per_lane <= 4 ? static_cast<int>(per_lane) : 8;
}

// The block kernels: one block per row.
inline detail::LaunchShape row_shape(std::int64_t rows) {
  return detail::row_shape(rows, "kernels::layernorm");
}

// The warp kernels: kWarps rows per block.
inline detail::LaunchShape warp_rows_shape(std::int64_t rows) {
  return {{detail::row_grid((rows + kWarps - 1) / kWarps, "kernels::layernorm")}, {kThreads}};
}

// launch(kernel, shape) with the forward kernel for `chunks` (warp_chunks' answer, or 0 for the
// block kernels); the same arguments for either family.
template <Storage kS, Storage kP, bool kResidual, typename Launch>
void with_forward_kernel(std::int64_t rows, int chunks, Launch launch) {
  switch (chunks) {
    case 1:
      return launch(forward_warp_kernel<kS, kP, kResidual, 1>, warp_rows_shape(rows));
    case 2:
      return launch(forward_warp_kernel<kS, kP, kResidual, 2>, warp_rows_shape(rows));
    case 3:
      return launch(forward_warp_kernel<kS, kP, kResidual, 3>, warp_rows_shape(rows));
    case 4:
      return launch(forward_warp_kernel<kS, kP, kResidual, 4>, warp_rows_shape(rows));
    case 8:
      return launch(forward_warp_kernel<kS, kP, kResidual, 8>, warp_rows_shape(rows));
    default:
      return launch(forward_kernel<kS, kP, kResidual>, row_shape(rows));
  }
}

// Likewise for the backward's dx.
template <Storage kS, Storage kP, typename Launch>
void with_backward_dx_kernel(std::int64_t rows, int chunks, Launch launch) {
  switch (chunks) {
    case 1:
      return launch(backward_dx_warp_kernel<kS, kP, 1>, warp_rows_shape(rows));
    case 2:
      return launch(backward_dx_warp_kernel<kS, kP, 2>, warp_rows_shape(rows));
    case 3:
      return launch(backward_dx_warp_kernel<kS, kP, 3>, warp_rows_shape(rows));
    case 4:
      return launch(backward_dx_warp_kernel<kS, kP, 4>, warp_rows_shape(rows));
    case 8:
      return launch(backward_dx_warp_kernel<kS, kP, 8>, warp_rows_shape(rows));
    default:
      return launch(backward_dx_kernel<kS, kP>, row_shape(rows));
  }
}

}  // namespace
}  // namespace mds::kernels::layernorm_detail
