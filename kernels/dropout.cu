#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/dropout.h"
#include "kernels/dropout_kernels.cuh"
#include "kernels/launch.cuh"

namespace mds::kernels {

using ops::DropoutStream;

namespace {

using detail::launch;
using detail::Storage;
using namespace dropout_detail;

}  // namespace

void dropout_forward(void* out, const void* x, const void* bias, const void* residual,
                     tensor::DType dtype, tensor::DType bias_dtype, std::int64_t n,
                     std::int64_t cols, const DropoutStream& stream, cudaStream_t cuda_stream) {
  detail::with_storages(dtype, bias_dtype, "dropout_forward", [&](auto s, auto p) {
    if (n <= 0) return;
    constexpr Storage kS = decltype(s)::value, kP = decltype(p)::value;
    if (detail::fits_chunks_of_8(n, cols, bias, {out, x, residual})) {
      launch("kernels::dropout_forward", forward8_kernel<kS, kP>, detail::chunks_of_8_shape(n),
             cuda_stream, out, x, bias, residual, n, cols, stream, keep_scale(stream));
    } else {
      launch("kernels::dropout_forward", forward_kernel<kS, kP>, groups_shape(n), cuda_stream, out,
             x, bias, residual, n, cols, stream, keep_scale(stream));
    }
  });
}

void dropout_forward(void* out, const void* x, const float* bias, const void* residual,
                     tensor::DType dtype, std::int64_t n, std::int64_t cols,
                     const DropoutStream& stream, cudaStream_t cuda_stream) {
  dropout_forward(out, x, bias, residual, dtype, tensor::DType::kFloat32, n, cols, stream,
                  cuda_stream);
}

void dropout_backward(void* dx, const void* dout, tensor::DType dtype, std::int64_t n,
                      const DropoutStream& stream, bool accumulate, cudaStream_t cuda_stream) {
  detail::with_storage(dtype, "dropout_backward", [&](auto s) {
    if (n <= 0) return;
    constexpr Storage kS = decltype(s)::value;
    if (detail::fits_chunks_of_8(n, 0, nullptr, {dx, dout})) {
      launch("kernels::dropout_backward", backward8_kernel<kS>, detail::chunks_of_8_shape(n),
             cuda_stream, dx, dout, n, stream, keep_scale(stream), accumulate);
    } else {
      launch("kernels::dropout_backward", backward_kernel<kS>, groups_shape(n), cuda_stream, dx,
             dout, n, stream, keep_scale(stream), accumulate);
    }
  });
}

void dropout_bias_grad(float* dbias, const void* dout, tensor::DType dtype, std::int64_t rows,
                       std::int64_t cols, const DropoutStream& stream, ColumnSumScratch& scratch,
                       cudaStream_t cuda_stream) {
  detail::with_storage(dtype, "dropout_bias_grad", [&](auto s) {
    if (rows <= 0 || cols <= 0) return;
    constexpr Storage kS = decltype(s)::value;
    if (detail::fits_columns8(cols, {dout})) {
      detail::launch_column_sums<1>("kernels::dropout_bias_grad", bias_grad8_kernel<kS>,
                                    detail::column8_shape(rows, cols), rows, cols, {{dbias}},
                                    scratch, cuda_stream, dout, rows, cols, stream,
                                    keep_scale(stream));
      return;
    }
    detail::launch_column_sums<1>(
        "kernels::dropout_bias_grad",
        cols % 4 == 0 ? bias_grad_shared_kernel<kS> : bias_grad_kernel<kS>, rows, cols, {{dbias}},
        scratch, cuda_stream, dout, rows, cols, stream, keep_scale(stream));
  });
}

bool bias_dropout_add_backward(void* dx, float* dbias, void* dresidual, const void* dout,
                               tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                               const DropoutStream& stream, bool accumulate,
                               ColumnSumScratch& scratch, cudaStream_t cuda_stream) {
  if (!detail::fits_columns8(cols, {dx, dresidual, dout})) return false;
  // The steps' order matters when dresidual shares memory with dx or dout: not fused then.
  if (dresidual != nullptr && (dresidual == dx || dresidual == dout)) return false;
  detail::with_storage(dtype, "bias_dropout_add_backward", [&](auto s) {
    if (rows <= 0 || cols <= 0) return;
    constexpr Storage kS = decltype(s)::value;
    detail::launch_column_sums<1>(
        "kernels::bias_dropout_add_backward", bias_dropout_add_backward8_kernel<kS>,
        detail::column8_shape(rows, cols, kBackwardChunkRows), rows, cols, {{dbias}}, scratch,
        cuda_stream, dx, dresidual, dout, rows, cols, stream, keep_scale(stream), accumulate);
  });
  return true;
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
                       const DropoutStream& stream, ColumnSumScratch& scratch,
                       cudaStream_t cuda_stream) {
  dropout_bias_grad(dbias, dout, tensor::DType::kFloat32, rows, cols, stream, scratch, cuda_stream);
}

}  // namespace mds::kernels
