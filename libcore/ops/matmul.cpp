#include "ops/matmul.h"

#include <algorithm>

#include "base/error.h"
#include "ops/activation_dtype.h"
#include "ops/check.h"
#include "ops/cpu/matmul.h"
#include "ops/cpu/widened.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using cpu::Fp32View;
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
  const DType dtype =
      detail::activation_dtype(kOp, {"x", x}, {{"out", out}, {"weight", weight}, {"bias", bias}});
  const bool has_bias = detail::given(bias);
  if (has_bias) detail::expect_shape(kOp, {"bias", bias}, {n});
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::linear_forward(ctx, out.raw(), x.raw(), weight.raw(), has_bias ? bias.raw() : nullptr,
                           dtype, m, n, k);
    }
    return;
  }
  const Fp32View out32(out, /*read=*/false), x32(x), weight32(weight), bias32(bias);
  cpu::linear_forward(out32.data(), x32.data(), weight32.data(), bias32.data(), m, n, k);
  out32.store();
}

void linear_backward(const DeviceContext& ctx, Tensor dx, Tensor dweight, Tensor dbias, Tensor dout,
                     Tensor x, Tensor weight, Dx dx_mode, Dx dweight_mode) {
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
  const DType dtype =
      detail::activation_dtype(kOp, {"dout", dout}, {{"x", x}, {"weight", weight}, {"dx", dx}});
  if (detail::rows_with_last_dim(kOp, {"x", x}, k) != m) {
    base::fail("ops::", kOp, ": x ", x.shape().to_string(), " does not match dout ",
               dout.shape().to_string());
  }
  if (detail::given(dx)) detail::expect_shape(kOp, {"dx", dx}, x.shape());
  float* dweight_ptr = nullptr;
  float* dbias_ptr = nullptr;
  if (detail::given(dweight)) {
    detail::expect_dtype(kOp, {"dweight", dweight}, DType::kFloat32);
    detail::expect_shape(kOp, {"dweight", dweight}, weight.shape());
    dweight_ptr = dweight.data<float>();
  }
  if (detail::given(dbias)) {
    detail::expect_dtype(kOp, {"dbias", dbias}, DType::kFloat32);
    detail::expect_shape(kOp, {"dbias", dbias}, {n});
    dbias_ptr = dbias.data<float>();
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::linear_backward(ctx, detail::given(dx) ? dx.raw() : nullptr, dweight_ptr, dbias_ptr,
                            dout.raw(), x.raw(), weight.raw(), dtype, m, n, k,
                            dx_mode == Dx::kAccumulate, dweight_mode == Dx::kAccumulate);
    }
    return;
  }
  // The host overwrites dx as it adds, onto zeros (dweight: beta = 0, the same).
  const bool overwrite = dx_mode == Dx::kOverwrite;
  const Fp32View dx32(dx, /*read=*/!overwrite), dout32(dout), x32(x), weight32(weight);
  if (overwrite && detail::given(dx)) std::fill_n(dx32.data(), dx.numel(), 0.0f);
  cpu::linear_backward(dx32.data(), dweight_ptr, dbias_ptr, dout32.data(), x32.data(),
                       weight32.data(), m, n, k, dweight_mode == Dx::kAccumulate);
  dx32.store();
}

void batched_matmul(const DeviceContext& ctx, Tensor out, Tensor a, Tensor b, bool transpose_a,
                    bool transpose_b, float alpha, float beta) {
  constexpr const char* kOp = "batched_matmul";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"a", a}, {"b", b}});
  const DType dtype = detail::activation_dtype(kOp, {"a", a}, {{"b", b}, {"out", out}});
  for (const detail::Arg arg : {detail::Arg{"out", out}, {"a", a}, {"b", b}}) {
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
      cuda::batched_matmul(ctx, out.raw(), a.raw(), b.raw(), dtype, batch, m, n, k, transpose_a,
                           transpose_b, alpha, beta);
    }
    return;
  }
  // With beta = 0 the product overwrites out, whose old values are not read.
  const Fp32View out32(out, /*read=*/beta != 0.0f), a32(a), b32(b);
  cpu::batched_matmul(out32.data(), a32.data(), b32.data(), batch, m, n, k, transpose_a,
                      transpose_b, alpha, beta);
  out32.store();
}

void linear_forward(Tensor out, Tensor x, Tensor weight, Tensor bias) {
  linear_forward(DeviceContext{}, out, x, weight, bias);
}

void linear_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x, Tensor weight,
                     Dx dx_mode, Dx dweight_mode) {
  linear_backward(DeviceContext{}, dx, dweight, dbias, dout, x, weight, dx_mode, dweight_mode);
}

void batched_matmul(Tensor out, Tensor a, Tensor b, bool transpose_a, bool transpose_b, float alpha,
                    float beta) {
  batched_matmul(DeviceContext{}, out, a, b, transpose_a, transpose_b, alpha, beta);
}

}  // namespace mds::ops
