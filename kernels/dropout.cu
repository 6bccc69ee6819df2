#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/dropout.h"
#include "kernels/philox.cuh"
#include "kernels/reduce_columns.cuh"

namespace mds::kernels {

using ops::DropoutStream;

namespace {

using detail::grid_for;
using detail::kThreads;
using detail::load;
using detail::Storage;
using detail::store;

// As the CPU: 1/(1 − p) in double, rounded once.
float keep_scale(const DropoutStream& stream) {
  return static_cast<float>(1.0 / (1.0 - static_cast<double>(stream.p)));
}

// Calls body(i, factor) for every element, factor = scale if kept else 0; a thread takes a
// group of four elements, one Philox block.
template <typename Body>
__device__ void for_each_masked(std::int64_t n, DropoutStream stream, float scale, Body body) {
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

// Activations (out, x, residual, dx, dout) are stored as kS: widened on load, rounded on store.
template <Storage kS>
__global__ void forward_kernel(void* out, const void* x, const float* bias, const void* residual,
                               std::int64_t n, std::int64_t cols, DropoutStream stream,
                               float scale) {
  for_each_masked(n, stream, scale, [&](std::int64_t i, float factor) {
    const float v = bias != nullptr ? load<kS>(x, i) + bias[i % cols] : load<kS>(x, i);
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
__global__ void bias_grad_kernel(float* dbias, const void* dout, std::int64_t rows,
                                 std::int64_t cols, DropoutStream stream, float scale) {
  detail::sum_columns<1>(
      rows, cols,
      [&](std::int64_t, std::int64_t, std::int64_t i, float* sums) {
        const auto index = static_cast<std::uint64_t>(i);
        const detail::PhiloxWords words =
            detail::philox_block(stream.seed, stream.offset, index / 4);
        if (detail::philox_uniform(words.w[index % 4]) >= stream.p)
          sums[0] += load<kS>(dout, i) * scale;
      },
      [&](std::int64_t c, const float* total) { dbias[c] += total[0]; });
}

unsigned groups_grid(std::int64_t n) {
  return grid_for((n + 3) / 4);
}

}  // namespace

void dropout_forward(void* out, const void* x, const float* bias, const void* residual,
                     tensor::DType dtype, std::int64_t n, std::int64_t cols,
                     const DropoutStream& stream, cudaStream_t cuda_stream) {
  detail::with_storage(dtype, "dropout_forward", [&](auto s) {
    if (n <= 0) return;
    forward_kernel<decltype(s)::value><<<groups_grid(n), kThreads, 0, cuda_stream>>>(
        out, x, bias, residual, n, cols, stream, keep_scale(stream));
    check_launch("kernels::dropout_forward");
  });
}

void dropout_backward(void* dx, const void* dout, tensor::DType dtype, std::int64_t n,
                      const DropoutStream& stream, bool accumulate, cudaStream_t cuda_stream) {
  detail::with_storage(dtype, "dropout_backward", [&](auto s) {
    if (n <= 0) return;
    backward_kernel<decltype(s)::value><<<groups_grid(n), kThreads, 0, cuda_stream>>>(
        dx, dout, n, stream, keep_scale(stream), accumulate);
    check_launch("kernels::dropout_backward");
  });
}

void dropout_bias_grad(float* dbias, const void* dout, tensor::DType dtype, std::int64_t rows,
                       std::int64_t cols, const DropoutStream& stream, cudaStream_t cuda_stream) {
  detail::with_storage(dtype, "dropout_bias_grad", [&](auto s) {
    if (rows <= 0 || cols <= 0) return;
    bias_grad_kernel<decltype(s)::value>
        <<<detail::column_blocks(cols), dim3(detail::kColumnTile, detail::kRowLanes), 0,
           cuda_stream>>>(dbias, dout, rows, cols, stream, keep_scale(stream));
    check_launch("kernels::dropout_bias_grad");
  });
}

void dropout_forward(float* out, const float* x, const float* bias, const float* residual,
                     std::int64_t n, std::int64_t cols, const DropoutStream& stream,
                     cudaStream_t cuda_stream) {
  dropout_forward(out, x, bias, residual, tensor::DType::kFloat32, n, cols, stream, cuda_stream);
}

void dropout_backward(float* dx, const float* dout, std::int64_t n, const DropoutStream& stream,
                      bool accumulate, cudaStream_t cuda_stream) {
  dropout_backward(dx, dout, tensor::DType::kFloat32, n, stream, accumulate, cuda_stream);
}

void dropout_bias_grad(float* dbias, const float* dout, std::int64_t rows, std::int64_t cols,
                       const DropoutStream& stream, cudaStream_t cuda_stream) {
  dropout_bias_grad(dbias, dout, tensor::DType::kFloat32, rows, cols, stream, cuda_stream);
}

}  // namespace mds::kernels
