#include "ops/matmul.h"

#include "base/error.h"
#include "ops/check.h"
#include "ops/cpu/matmul.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

void linear_forward(const DeviceContext& ctx, Tensor out, Tensor x, Tensor weight, Tensor bias) {
  constexpr const char* kOp = "linear_forward";
  const bool on_device =
      detail::on_cuda(kOp, ctx, {{"out", out}, {"x", x}, {"weight", weight}, {"bias", bias}});
  if (weight.shape().rank() != 2) {
    base::fail("ops::", kOp, ": weight must be [out, in], got ", weight.shape().to_string());
  }
  const std::int64_t n = weight.dim(0), k = weight.dim(1);
  const std::int64_t m = detail::rows_with_last_dim(kOp, {"x", x}, k);
  if (detail::rows_with_last_dim(kOp, {"out", out}, n) != m) {
    base::fail("ops::", kOp, ": out ", out.shape().to_string(), " does not match x ",
               x.shape().to_string());
  }
  for (const detail::Arg arg : {detail::Arg{"out", out}, {"x", x}, {"weight", weight}}) {
    detail::expect_dtype(kOp, arg, DType::kFloat32);
  }
  const bool has_bias = detail::given(bias);
  if (has_bias) {
    detail::expect_dtype(kOp, {"bias", bias}, DType::kFloat32);
    detail::expect_shape(kOp, {"bias", bias}, {n});
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::linear_forward(ctx, out.data<float>(), x.data<float>(), weight.data<float>(),
                           has_bias ? bias.data<float>() : nullptr, m, n, k);
    }
    return;
  }
  cpu::linear_forward(out.data<float>(), x.data<float>(), weight.data<float>(),
                      has_bias ? bias.data<float>() : nullptr, m, n, k);
}

void linear_backward(const DeviceContext& ctx, Tensor dx, Tensor dweight, Tensor dbias, Tensor dout,
                     Tensor x, Tensor weight) {
  constexpr const char* kOp = "linear_backward";
  const bool on_device = detail::on_cuda(kOp, ctx,
                                         {{"dx", dx},
                                          {"dweight", dweight},
                                          {"dbias", dbias},
                                          {"dout", dout},
                                          {"x", x},
                                          {"weight", weight}});
  if (weight.shape().rank() != 2) {
    base::fail("ops::", kOp, ": weight must be [out, in], got ", weight.shape().to_string());
  }
  const std::int64_t n = weight.dim(0), k = weight.dim(1);
  const std::int64_t m = detail::rows_with_last_dim(kOp, {"dout", dout}, n);
  for (const detail::Arg arg : {detail::Arg{"dout", dout}, {"x", x}, {"weight", weight}}) {
    detail::expect_dtype(kOp, arg, DType::kFloat32);
  }
  if (detail::rows_with_last_dim(kOp, {"x", x}, k) != m) {
    base::fail("ops::", kOp, ": x ", x.shape().to_string(), " does not match dout ",
               dout.shape().to_string());
  }
  float* dx_ptr = nullptr;
  float* dweight_ptr = nullptr;
  float* dbias_ptr = nullptr;
  if (detail::given(dx)) {
    detail::expect_shape(kOp, {"dx", dx}, x.shape());
    dx_ptr = dx.data<float>();
  }
  if (detail::given(dweight)) {
    detail::expect_shape(kOp, {"dweight", dweight}, weight.shape());
    dweight_ptr = dweight.data<float>();
  }
  if (detail::given(dbias)) {
    detail::expect_shape(kOp, {"dbias", dbias}, {n});
    dbias_ptr = dbias.data<float>();
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::linear_backward(ctx, dx_ptr, dweight_ptr, dbias_ptr, dout.data<float>(),
                            x.data<float>(), weight.data<float>(), m, n, k);
    }
    return;
  }
  cpu::linear_backward(dx_ptr, dweight_ptr, dbias_ptr, dout.data<float>(), x.data<float>(),
                       weight.data<float>(), m, n, k);
}

void batched_matmul(const DeviceContext& ctx, Tensor out, Tensor a, Tensor b, bool transpose_a,
                    bool transpose_b, float alpha, float beta) {
  constexpr const char* kOp = "batched_matmul";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"a", a}, {"b", b}});
  for (const detail::Arg arg : {detail::Arg{"out", out}, {"a", a}, {"b", b}}) {
    detail::expect_dtype(kOp, arg, DType::kFloat32);
    if (arg.tensor.shape().rank() != 3) {
      base::fail("ops::", kOp, ": ", arg.name, " must be [batch, rows, cols], got ",
                 arg.tensor.shape().to_string());
    }
  }
  const std::int64_t batch = out.dim(0), m = out.dim(1), n = out.dim(2);
  const std::int64_t k = transpose_a ? a.dim(1) : a.dim(2);
  detail::expect_shape(kOp, {"a", a},
                       transpose_a ? tensor::Shape{batch, k, m} : tensor::Shape{batch, m, k});
  detail::expect_shape(kOp, {"b", b},
                       transpose_b ? tensor::Shape{batch, n, k} : tensor::Shape{batch, k, n});
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::batched_matmul(ctx, out.data<float>(), a.data<float>(), b.data<float>(), batch, m, n, k,
                           transpose_a, transpose_b, alpha, beta);
    }
    return;
  }
  cpu::batched_matmul(out.data<float>(), a.data<float>(), b.data<float>(), batch, m, n, k,
                      transpose_a, transpose_b, alpha, beta);
}

void linear_forward(Tensor out, Tensor x, Tensor weight, Tensor bias) {
  linear_forward(DeviceContext{}, out, x, weight, bias);
}

void linear_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                     Tensor weight) {
  linear_backward(DeviceContext{}, dx, dweight, dbias, dout, x, weight);
}

void batched_matmul(Tensor out, Tensor a, Tensor b, bool transpose_a, bool transpose_b, float alpha,
                    float beta) {
  batched_matmul(DeviceContext{}, out, a, b, transpose_a, transpose_b, alpha, beta);
}

}  // namespace mds::ops
