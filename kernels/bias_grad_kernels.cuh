// Device code of the linear layer's bias gradient (kernels/gemm.cu's linear_backward): dbias +=
// the column sums of dout [rows, cols], widened to fp32, rows in reduce_columns.cuh's fixed order.
// Plain CUDA with no runtime includes, so that tests/unit/kernels_emulated_bias_grad_test.cpp
// runs it on the CPU; included by that .cu and that test only (internal linkage).
#pragma once
#include <cstdint>
#include <initializer_list>

#include "kernels/device_portable.cuh"
#include "kernels/reduce_columns.cuh"

namespace mds::kernels::bias_grad_detail {
namespace {

using detail::Storage;

// Rows a block sums: with 256, GPT-2 124M's qkv bias gradient ([8192, 2304]) gave 288 blocks, two
// or three an SM of an H100 (23 µs a call for 38 MB in session 15's profile).
constexpr std::int64_t kChunkRows = 64;

// One column a thread (sum_columns), or with kBy8 eight columns a thread with 16-byte loads
// (sum_columns8, the same bits); kChunkRows rows a block.
template <Storage kS, bool kBy8>
__global__ void bias_grad_kernel(const void* dout, std::int64_t rows, std::int64_t cols,
                                 detail::ColumnSink<1> sink) {
  if constexpr (kBy8) {
    detail::sum_columns8<1, 8, kChunkRows>(
        rows, cols, [&](std::int64_t, std::int64_t i) { return detail::load_raw8<kS>(dout, i); },
        [&](std::int64_t, std::int64_t, const detail::Raw8<kS>& loaded, float(&sums)[1][8]) {
          float v[8];
          detail::widen8<kS>(loaded, v);
          for (int j = 0; j < 8; ++j) sums[0][j] += v[j];
        },
        sink);
  } else {
    detail::sum_columns<1, kChunkRows>(
        rows, cols,
        [&](std::int64_t, std::int64_t, std::int64_t i, float* sums) {
          sums[0] += detail::load<kS>(dout, i);
        },
        sink);
  }
}

// launch(kernel, shape) with the eight-column kernel where cols and dout allow, the other
// elsewhere (the same arguments for both).
template <Storage kS, typename Launch>
void with_bias_grad_kernel(std::int64_t rows, std::int64_t cols, const void* dout, Launch launch) {
  if (detail::fits_columns8(cols, {dout})) {
    launch(bias_grad_kernel<kS, true>, detail::column8_shape(rows, cols, kChunkRows));
  } else {
    launch(bias_grad_kernel<kS, false>, detail::column_shape(rows, cols, kChunkRows));
  }
}

}  // namespace
}  // namespace mds::kernels::bias_grad_detail
