#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/gelu.h"
#include "kernels/gelu_kernels.cuh"
#include "kernels/launch.cuh"

namespace mds::kernels {

using ops::GeluKind;

namespace {

using detail::launch;
using detail::Storage;
using namespace gelu_detail;

// The forward over n elements in rows of cols: eight elements a thread where the sizes and
// alignments allow (forward8_kernel), one otherwise.
template <Storage kS, Storage kP, GeluKind kKind>
void launch_forward(const char* name, void* out, const void* x, const void* bias, std::int64_t n,
                    std::int64_t cols, cudaStream_t stream) {
  if (detail::fits_chunks_of_8(n, cols, bias, {out, x})) {
    launch(name, forward8_kernel<kS, kP, kKind>, detail::chunks_of_8_shape(n), stream, out, x, bias,
           n, cols);
  } else {
    launch(name, forward_kernel<kS, kP, kKind>, elementwise_shape(n), stream, out, x, bias, n,
           cols);
  }
}

}  // namespace

void gelu_forward(void* out, const void* x, tensor::DType dtype, std::int64_t n, GeluKind kind,
                  cudaStream_t stream) {
  detail::with_storage(dtype, "gelu_forward", [&](auto s) {
    if (n <= 0) return;
    with_kind(kind, [&](auto k) {
      launch_forward<decltype(s)::value, Storage::kF32, decltype(k)::value>(
          "kernels::gelu_forward", out, x, nullptr, n, 1, stream);
    });
  });
}

void gelu_backward(void* dx, const void* dout, const void* x, tensor::DType dtype, std::int64_t n,
                   GeluKind kind, cudaStream_t stream) {
  detail::with_storage(dtype, "gelu_backward", [&](auto s) {
    if (n <= 0) return;
    with_kind(kind, [&](auto k) {
      launch("kernels::gelu_backward",
             backward_kernel<decltype(s)::value, Storage::kF32, decltype(k)::value>,
             elementwise_shape(n), stream, dx, dout, x, nullptr, n, 1, true);
    });
  });
}

void bias_gelu_forward(void* out, const void* x, const void* bias, tensor::DType dtype,
                       tensor::DType bias_dtype, std::int64_t rows, std::int64_t cols,
                       GeluKind kind, cudaStream_t stream) {
  detail::with_storages(dtype, bias_dtype, "bias_gelu_forward", [&](auto s, auto p) {
    const std::int64_t n = rows * cols;
    if (n <= 0) return;
    with_kind(kind, [&](auto k) {
      launch_forward<decltype(s)::value, decltype(p)::value, decltype(k)::value>(
          "kernels::bias_gelu_forward", out, x, bias, n, cols, stream);
    });
  });
}

void bias_gelu_backward(void* dx, float* dbias, const void* dout, const void* x, const void* bias,
                        tensor::DType dtype, tensor::DType bias_dtype, std::int64_t rows,
                        std::int64_t cols, GeluKind kind, ColumnSumScratch& scratch,
                        cudaStream_t stream, bool accumulate) {
  detail::with_storages(dtype, bias_dtype, "bias_gelu_backward", [&](auto s, auto p) {
    const std::int64_t n = rows * cols;
    if (n <= 0) return;
    with_kind(kind, [&](auto k) {
      constexpr Storage kS = decltype(s)::value;
      constexpr Storage kP = decltype(p)::value;
      constexpr GeluKind kKind = decltype(k)::value;
      if (dbias == nullptr) {
        launch("kernels::bias_gelu_backward", backward_kernel<kS, kP, kKind>, elementwise_shape(n),
               stream, dx, dout, x, bias, n, cols, accumulate);
      } else {
        with_backward_bias_kernel<kS, kP, kKind>(
            rows, cols, {dx, dout, x, bias}, [&](auto kernel, const detail::LaunchShape& shape) {
              detail::launch_column_sums<1>("kernels::bias_gelu_backward", kernel, shape, rows,
                                            cols, {{dbias}}, scratch, stream, dx, dout, x, bias,
                                            rows, cols, accumulate);
            });
      }
    });
  });
}

void bias_gelu_forward(void* out, const void* x, const float* bias, tensor::DType dtype,
                       std::int64_t rows, std::int64_t cols, GeluKind kind, cudaStream_t stream) {
  bias_gelu_forward(out, x, bias, dtype, tensor::DType::kFloat32, rows, cols, kind, stream);
}

void bias_gelu_backward(void* dx, float* dbias, const void* dout, const void* x, const float* bias,
                        tensor::DType dtype, std::int64_t rows, std::int64_t cols, GeluKind kind,
                        ColumnSumScratch& scratch, cudaStream_t stream) {
  bias_gelu_backward(dx, dbias, dout, x, bias, dtype, tensor::DType::kFloat32, rows, cols, kind,
                     scratch, stream);
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
                        ColumnSumScratch& scratch, cudaStream_t stream) {
  bias_gelu_backward(dx, dbias, dout, x, bias, tensor::DType::kFloat32, rows, cols, kind, scratch,
                     stream);
}

}  // namespace mds::kernels
