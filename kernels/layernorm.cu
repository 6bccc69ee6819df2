#include "kernels/check.h"
#include "kernels/device_common.cuh"
#include "kernels/launch.cuh"
#include "kernels/layernorm.h"
#include "kernels/layernorm_kernels.cuh"

namespace mds::kernels {

namespace {

using detail::launch;
using detail::Storage;
using namespace layernorm_detail;

// Chunks a lane for the warp kernels, or 0 for the block kernels (forced, or where rows or
// alignment do not allow the warp kernels).
int chunks_for(LayerNormKernel family, std::int64_t cols,
               std::initializer_list<const void*> arrays) {
  return family == LayerNormKernel::kBlock ? 0 : warp_chunks(cols, arrays);
}

}  // namespace

void layernorm_forward(void* out, float* mean, float* rstd, const void* x, const void* weight,
                       const void* bias, tensor::DType dtype, tensor::DType param_dtype,
                       std::int64_t rows, std::int64_t cols, float eps, cudaStream_t stream,
                       LayerNormKernel kernel_family) {
  detail::with_storages(dtype, param_dtype, "layernorm_forward", [&](auto s, auto p) {
    if (rows <= 0 || cols <= 0) return;
    with_forward_kernel<decltype(s)::value, decltype(p)::value, false>(
        rows, chunks_for(kernel_family, cols, {out, x, weight, bias}),
        [&](auto kernel, const detail::LaunchShape& shape) {
          launch("kernels::layernorm_forward", kernel, shape, stream, out, mean, rstd, nullptr, x,
                 nullptr, weight, bias, rows, cols, eps);
        });
  });
}

void residual_layernorm_forward(void* sum_out, void* out, float* mean, float* rstd, const void* x,
                                const void* residual, const void* weight, const void* bias,
                                tensor::DType dtype, tensor::DType param_dtype, std::int64_t rows,
                                std::int64_t cols, float eps, cudaStream_t stream,
                                LayerNormKernel kernel_family) {
  detail::with_storages(dtype, param_dtype, "residual_layernorm_forward", [&](auto s, auto p) {
    if (rows <= 0 || cols <= 0) return;
    with_forward_kernel<decltype(s)::value, decltype(p)::value, true>(
        rows, chunks_for(kernel_family, cols, {sum_out, out, x, residual, weight, bias}),
        [&](auto kernel, const detail::LaunchShape& shape) {
          launch("kernels::residual_layernorm_forward", kernel, shape, stream, out, mean, rstd,
                 sum_out, x, residual, weight, bias, rows, cols, eps);
        });
  });
}

void layernorm_backward(void* dx, float* dweight, float* dbias, const void* dout, const void* x,
                        const void* weight, const float* mean, const float* rstd,
                        tensor::DType dtype, tensor::DType param_dtype, std::int64_t rows,
                        std::int64_t cols, ColumnSumScratch& scratch, cudaStream_t stream,
                        LayerNormKernel kernel_family) {
  detail::with_storages(dtype, param_dtype, "layernorm_backward", [&](auto s, auto p) {
    constexpr Storage kS = decltype(s)::value;
    if (rows <= 0 || cols <= 0) return;
    const int chunks = chunks_for(kernel_family, cols, {dx, dout, x, weight});
    if ((dweight != nullptr || dbias != nullptr) && kernel_family == LayerNormKernel::kAuto &&
        fused_backward_applies(chunks)) {
      float* partials =
          scratch.partials(static_cast<std::size_t>(2 * fused_chunks(rows) * cols), stream);
      with_fused_backward_kernel<kS, decltype(p)::value>(
          rows, chunks, [&](auto kernel, const detail::LaunchShape& shape) {
            launch("kernels::layernorm_backward (dx, parameter sums)", kernel, shape, stream, dx,
                   dout, x, weight, mean, rstd, rows, cols, partials);
          });
      launch("kernels::layernorm_backward (dweight, dbias)", backward_params_finish_kernel,
             fused_finish_shape(cols), stream, partials, fused_chunks(rows), cols,
             detail::ColumnOutputs<2>{{dweight, dbias}});
      return;
    }
    with_backward_dx_kernel<kS, decltype(p)::value>(
        rows, chunks, [&](auto kernel, const detail::LaunchShape& shape) {
          launch("kernels::layernorm_backward (dx)", kernel, shape, stream, dx, dout, x, weight,
                 mean, rstd, rows, cols);
        });
    if (dweight == nullptr && dbias == nullptr) return;
    with_backward_params_kernel<kS>(
        rows, cols, {dout, x}, [&](auto kernel, const detail::LaunchShape& shape) {
          detail::launch_column_sums<2>("kernels::layernorm_backward (dweight, dbias)", kernel,
                                        shape, rows, cols, {{dweight, dbias}}, scratch, stream,
                                        dout, x, mean, rstd, rows, cols);
        });
  });
}

void layernorm_forward(void* out, float* mean, float* rstd, const void* x, const float* weight,
                       const float* bias, tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                       float eps, cudaStream_t stream) {
  layernorm_forward(out, mean, rstd, x, weight, bias, dtype, tensor::DType::kFloat32, rows, cols,
                    eps, stream);
}

void residual_layernorm_forward(void* sum_out, void* out, float* mean, float* rstd, const void* x,
                                const void* residual, const float* weight, const float* bias,
                                tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                                float eps, cudaStream_t stream) {
  residual_layernorm_forward(sum_out, out, mean, rstd, x, residual, weight, bias, dtype,
                             tensor::DType::kFloat32, rows, cols, eps, stream);
}

void layernorm_backward(void* dx, float* dweight, float* dbias, const void* dout, const void* x,
                        const float* weight, const float* mean, const float* rstd,
                        tensor::DType dtype, std::int64_t rows, std::int64_t cols,
                        ColumnSumScratch& scratch, cudaStream_t stream) {
  layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, dtype,
                     tensor::DType::kFloat32, rows, cols, scratch, stream);
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, std::int64_t rows, std::int64_t cols, float eps,
                       cudaStream_t stream) {
  layernorm_forward(out, mean, rstd, x, weight, bias, tensor::DType::kFloat32, rows, cols, eps,
                    stream);
}

void residual_layernorm_forward(float* sum_out, float* out, float* mean, float* rstd,
                                const float* x, const float* residual, const float* weight,
                                const float* bias, std::int64_t rows, std::int64_t cols, float eps,
                                cudaStream_t stream) {
  residual_layernorm_forward(sum_out, out, mean, rstd, x, residual, weight, bias,
                             tensor::DType::kFloat32, rows, cols, eps, stream);
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd,
                        std::int64_t rows, std::int64_t cols, ColumnSumScratch& scratch,
                        cudaStream_t stream) {
  layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, tensor::DType::kFloat32, rows,
                     cols, scratch, stream);
}

}  // namespace mds::kernels
