#include "kernels/gemm_gelu.h"

#include "base/error.h"
#include "kernels/device_common.cuh"
#include "kernels/launch.cuh"

namespace mds::kernels {

namespace {

// dbias[i] += the 16-bit sums, widened (exact).
template <detail::Storage kS>
__global__ void add_widened_kernel(float* dbias, const void* sums, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dbias[i] += detail::load<kS>(sums, i);
}

GemmOptions sixteen_bit(tensor::DType dtype, const char* op) {
  if (dtype != tensor::DType::kBFloat16 && dtype != tensor::DType::kFloat16) {
    base::fail("kernels::", op, ": the GeLU epilogues take bfloat16 or float16 activations, got ",
               tensor::dtype_name(dtype));
  }
  GemmOptions options;
  options.input = options.output = dtype;
  return options;
}

}  // namespace

void linear_bias_gelu_forward(GemmContext& context, void* out, void* pre_activation, const void* x,
                              const void* weight, const void* bias, tensor::DType dtype,
                              std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t stream) {
  GemmOptions options = sixteen_bit(dtype, "linear_bias_gelu_forward");
  options.epilogue = GemmEpilogue::kBiasGeluAux;
  options.bias = bias;
  options.aux = pre_activation;
  gemm(context, m, n, k, 1.0f, {x, k, false}, {weight, k, true}, 0.0f, out, n, options, stream);
}

void linear_dgelu_backward(GemmContext& context, void* dpre, float* dbias, const void* dout,
                           const void* weight, const void* pre_activation, tensor::DType dtype,
                           std::int64_t m, std::int64_t n, std::int64_t k, Scratch* scratch,
                           cudaStream_t stream) {
  GemmOptions options = sixteen_bit(dtype, "linear_dgelu_backward");
  if (m <= 0 || k <= 0) return;
  if (n <= 0) base::fail("kernels::linear_dgelu_backward: the product needs n > 0, got ", n);
  const CallScratch sums(scratch, static_cast<std::size_t>(k) * tensor::dtype_size(dtype), stream);
  options.epilogue = GemmEpilogue::kDGeluBiasGrad;
  options.aux = const_cast<void*>(pre_activation);  // read by this epilogue
  options.bias_grad = sums.data();
  gemm(context, m, k, n, 1.0f, {dout, n, false}, {weight, k, false}, 0.0f, dpre, k, options,
       stream);
  detail::with_storage(dtype, "linear_dgelu_backward", [&](auto s) {
    detail::launch("kernels::linear_dgelu_backward (dbias)", add_widened_kernel<decltype(s)::value>,
                   detail::thread_per_element_shape(k), stream, dbias, sums.data(), k);
  });
}

}  // namespace mds::kernels
