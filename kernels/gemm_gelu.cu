#include "kernels/gemm_gelu.h"

#include "base/error.h"

namespace mds::kernels {

void linear_bias_gelu_forward(GemmContext& context, void* out, void* pre_activation, const void* x,
                              const void* weight, const void* bias, tensor::DType dtype,
                              std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t stream) {
  if (dtype != tensor::DType::kBFloat16 && dtype != tensor::DType::kFloat16) {
    base::fail(
        "kernels::linear_bias_gelu_forward: the GeLU epilogue takes bfloat16 or float16 "
        "activations, got ",
        tensor::dtype_name(dtype));
  }
  GemmOptions options;
  options.input = options.output = dtype;
  options.epilogue = GemmEpilogue::kBiasGeluAux;
  options.bias = bias;
  options.aux = pre_activation;
  gemm(context, m, n, k, 1.0f, {x, k, false}, {weight, k, true}, 0.0f, out, n, options, stream);
}

}  // namespace mds::kernels
