#include "ops/gelu_epilogues.h"

#include "base/error.h"
#include "ops/activation_dtype.h"
#include "ops/check.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

namespace {

bool sixteen_bit(DType dtype) {
  return dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

// x [m, k]·weight[n, k]ᵀ: the weight's [n, k] and the rows of `x` [..., k]; fails naming the op
// otherwise.
struct Product {
  std::int64_t m, n, k;
};

Product product_of(const char* op, detail::Arg x, Tensor weight) {
  if (weight.shape().rank() != 2) {
    base::fail("ops::", op, ": weight must be [out, in], got ", weight.shape().to_string());
  }
  const std::int64_t n = weight.dim(0), k = weight.dim(1);
  return {detail::rows_with_last_dim(op, x, k), n, k};
}

DType expect_sixteen_bit(const char* op, detail::Arg x, std::initializer_list<detail::Arg> others) {
  const DType dtype = detail::activation_dtype(op, x, others);
  if (!sixteen_bit(dtype)) {
    base::fail("ops::", op, ": needs bfloat16 or float16 activations, got ",
               tensor::dtype_name(dtype));
  }
  return dtype;
}

void expect_device(const char* op, bool on_device) {
  if (!on_device) base::fail("ops::", op, ": runs on a CUDA device only");
}

}  // namespace

bool gelu_epilogues_apply(const DeviceContext& ctx, Tensor pre_activation, Tensor bias,
                          GeluKind kind) {
  const DType dtype = pre_activation.dtype();
  const tensor::Shape& shape = pre_activation.shape();
  return ctx.is_cuda() && kind != GeluKind::kErf && sixteen_bit(dtype) && bias.dtype() == dtype &&
         shape.rank() >= 1 && shape[shape.rank() - 1] % 8 == 0;
}

void linear_bias_gelu_forward(const DeviceContext& ctx, Tensor out, Tensor pre_activation, Tensor x,
                              Tensor weight, Tensor bias) {
  constexpr const char* kOp = "linear_bias_gelu_forward";
  expect_device(kOp, detail::on_cuda(kOp, ctx,
                                     {{"out", out},
                                      {"pre_activation", pre_activation},
                                      {"x", x},
                                      {"weight", weight},
                                      {"bias", bias}}));
  const Product p = product_of(kOp, {"x", x}, weight);
  const DType dtype = expect_sixteen_bit(
      kOp, {"x", x},
      {{"out", out}, {"pre_activation", pre_activation}, {"weight", weight}, {"bias", bias}});
  detail::expect_shape(kOp, {"bias", bias}, {p.n});
  for (const detail::Arg arg : {detail::Arg{"out", out}, {"pre_activation", pre_activation}}) {
    if (detail::rows_with_last_dim(kOp, arg, p.n) != p.m) {
      base::fail("ops::", kOp, ": ", arg.name, " ", arg.tensor.shape().to_string(),
                 " does not match x ", x.shape().to_string());
    }
  }
  if constexpr (detail::kCudaBuilt) {
    cuda::linear_bias_gelu_forward(ctx, out.raw(), pre_activation.raw(), x.raw(), weight.raw(),
                                   bias.raw(), dtype, p.m, p.n, p.k);
  }
}

}  // namespace mds::ops
