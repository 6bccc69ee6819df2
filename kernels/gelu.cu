#include <type_traits>

#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/gelu.h"
#include "kernels/reduce_columns.cuh"

namespace mds::kernels {

using ops::GeluKind;

namespace {

using detail::grid_for;
using detail::kThreads;
using detail::load;
using detail::Storage;
using detail::store;

// The expressions of ops/cpu/gelu.cpp, term by term (nvcc's FMA contraction is off for this
// library, so each operation rounds as on the CPU).
template <GeluKind kKind>
__device__ float gelu_of(float z) {
  if constexpr (kKind == GeluKind::kTanhFused) {
    return z * 0.5f * (1.0f + tanhf(0.79788456f * z * (1.0f + 0.044715f * z * z)));
  } else if constexpr (kKind == GeluKind::kTanhOpenAI) {
    return 0.5f * z * (1.0f + tanhf(0.7978845608028654f * z * (1.0f + 0.044715f * z * z)));
  } else {
    return z * 0.5f * (1.0f + erff(z * 0.70710678118654752f));
  }
}

template <GeluKind kKind>
__device__ float gelu_derivative_of(float z) {
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
// fp32 and may be null (then cols is unused).
template <Storage kS, GeluKind kKind>
__global__ void forward_kernel(void* out, const void* x, const float* bias, std::int64_t n,
                               std::int64_t cols) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float z = load<kS>(x, i);
    store<kS>(out, i, gelu_of<kKind>(bias != nullptr ? z + bias[i % cols] : z));
  }
}

template <Storage kS, GeluKind kKind>
__global__ void backward_kernel(void* dx, const void* dout, const void* x, const float* bias,
                                std::int64_t n, std::int64_t cols) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float z = load<kS>(x, i);
    store<kS>(
        dx, i,
        load<kS>(dx, i) + gelu_derivative_of<kKind>(bias != nullptr ? z + bias[i % cols] : z) *
                              load<kS>(dout, i));
  }
}

// Each element's gradient once (in fp32), feeding dx and its column's sum, as the CPU's
// backward_block.
template <Storage kS, GeluKind kKind>
__global__ void backward_bias_kernel(void* dx, float* dbias, const void* dout, const void* x,
                                     const float* bias, std::int64_t rows, std::int64_t cols) {
  detail::sum_columns<1>(
      rows, cols,
      [&](std::int64_t, std::int64_t c, std::int64_t i, float* sums) {
        const float g = gelu_derivative_of<kKind>(load<kS>(x, i) + bias[c]) * load<kS>(dout, i);
        sums[0] += g;
        store<kS>(dx, i, load<kS>(dx, i) + g);
      },
      [&](std::int64_t c, const float* total) { dbias[c] += total[0]; });
}

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

void gelu_forward(void* out, const void* x, tensor::DType dtype, std::int64_t n, GeluKind kind,
                  cudaStream_t stream) {
  detail::with_storage(dtype, "gelu_forward", [&](auto s) {
    if (n <= 0) return;
    with_kind(kind, [&](auto k) {
      forward_kernel<decltype(s)::value, decltype(k)::value>
          <<<grid_for(n), kThreads, 0, stream>>>(out, x, nullptr, n, 1);
    });
    check_launch("kernels::gelu_forward");
  });
}

void gelu_backward(void* dx, const void* dout, const void* x, tensor::DType dtype, std::int64_t n,
                   GeluKind kind, cudaStream_t stream) {
  detail::with_storage(dtype, "gelu_backward", [&](auto s) {
    if (n <= 0) return;
    with_kind(kind, [&](auto k) {
      backward_kernel<decltype(s)::value, decltype(k)::value>
          <<<grid_for(n), kThreads, 0, stream>>>(dx, dout, x, nullptr, n, 1);
    });
    check_launch("kernels::gelu_backward");
  });
}

void bias_gelu_forward(void* out, const void* x, const float* bias, tensor::DType dtype,
                       std::int64_t rows, std::int64_t cols, GeluKind kind, cudaStream_t stream) {
  detail::with_storage(dtype, "bias_gelu_forward", [&](auto s) {
    const std::int64_t n = rows * cols;
    if (n <= 0) return;
    with_kind(kind, [&](auto k) {
      forward_kernel<decltype(s)::value, decltype(k)::value>
          <<<grid_for(n), kThreads, 0, stream>>>(out, x, bias, n, cols);
    });
    check_launch("kernels::bias_gelu_forward");
  });
}

void bias_gelu_backward(void* dx, float* dbias, const void* dout, const void* x, const float* bias,
                        tensor::DType dtype, std::int64_t rows, std::int64_t cols, GeluKind kind,
                        cudaStream_t stream) {
  detail::with_storage(dtype, "bias_gelu_backward", [&](auto s) {
    const std::int64_t n = rows * cols;
    if (n <= 0) return;
    with_kind(kind, [&](auto k) {
      constexpr Storage kS = decltype(s)::value;
      constexpr GeluKind kKind = decltype(k)::value;
      if (dbias == nullptr) {
        backward_kernel<kS, kKind>
            <<<grid_for(n), kThreads, 0, stream>>>(dx, dout, x, bias, n, cols);
      } else {
        backward_bias_kernel<kS, kKind>
            <<<detail::column_blocks(cols), dim3(detail::kColumnTile, detail::kRowLanes), 0,
               stream>>>(dx, dbias, dout, x, bias, rows, cols);
      }
    });
    check_launch("kernels::bias_gelu_backward");
  });
}

void gelu_forward(float* out, const float* x, std::int64_t n, GeluKind kind, cudaStream_t stream) {
  gelu_forward(out, x, tensor::DType::kFloat32, n, kind, stream);
}

void gelu_backward(float* dx, const float* dout, const float* x, std::int64_t n, GeluKind kind,
                   cudaStream_t stream) {
  gelu_backward(dx, dout, x, tensor::DType::kFloat32, n, kind, stream);
}

void bias_gelu_forward(float* out, const float* x, const float* bias, std::int64_t rows,
                       std::int64_t cols, GeluKind kind, cudaStream_t stream) {
  bias_gelu_forward(out, x, bias, tensor::DType::kFloat32, rows, cols, kind, stream);
}

void bias_gelu_backward(float* dx, float* dbias, const float* dout, const float* x,
                        const float* bias, std::int64_t rows, std::int64_t cols, GeluKind kind,
                        cudaStream_t stream) {
  bias_gelu_backward(dx, dbias, dout, x, bias, tensor::DType::kFloat32, rows, cols, kind, stream);
}

}  // namespace mds::kernels
