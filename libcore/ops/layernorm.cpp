#include "ops/layernorm.h"

#include "base/error.h"
#include "ops/activation_dtype.h"
#include "ops/check.h"
#include "ops/cpu/layernorm.h"
#include "ops/cpu/widened.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

namespace {

// Checks the arguments shared by forward and backward (the fp32 statistics and the weight's shape;
// the dtypes of x and the parameters are the caller's checks); returns the row count.
std::int64_t check_common(const char* op, const Tensor& x, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd) {
  if (weight.shape().rank() != 1) {
    base::fail("ops::", op, ": weight must be [C], got ", weight.shape().to_string());
  }
  const std::int64_t cols = weight.dim(0);
  const std::int64_t rows = detail::rows_with_last_dim(op, {"x", x}, cols);
  for (const detail::Arg arg : {detail::Arg{"mean", mean}, {"rstd", rstd}}) {
    detail::expect_dtype(op, arg, DType::kFloat32);
  }
  detail::expect_numel(op, {"mean", mean}, rows);
  detail::expect_numel(op, {"rstd", rstd}, rows);
  return rows;
}

}  // namespace

void layernorm_forward(const DeviceContext& ctx, Tensor out, Tensor mean, Tensor rstd, Tensor x,
                       Tensor weight, Tensor bias, float eps) {
  constexpr const char* kOp = "layernorm_forward";
  const bool on_device = detail::on_cuda(
      kOp, ctx,
      {{"out", out}, {"mean", mean}, {"rstd", rstd}, {"x", x}, {"weight", weight}, {"bias", bias}});
  const DType dtype = detail::activation_dtype(kOp, {"x", x}, {{"out", out}});
  const DType param_dtype =
      detail::parameter_dtype(kOp, {"x", x}, {"weight", weight}, {{"bias", bias}});
  const std::int64_t rows = check_common(kOp, x, weight, mean, rstd);
  detail::expect_shape(kOp, {"out", out}, x.shape());
  detail::expect_shape(kOp, {"bias", bias}, weight.shape());
  if (!(eps > 0.0f)) base::fail("ops::", kOp, ": eps must be positive, got ", eps);
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::layernorm_forward(ctx, out.raw(), mean.data<float>(), rstd.data<float>(), x.raw(),
                              weight.raw(), bias.raw(), dtype, param_dtype, rows, weight.dim(0),
                              eps);
    }
    return;
  }
  const cpu::Fp32View vout(out, false), vx(x), vweight(weight), vbias(bias);
  cpu::layernorm_forward(vout.data(), mean.data<float>(), rstd.data<float>(), vx.data(),
                         vweight.data(), vbias.data(), rows, weight.dim(0), eps);
  vout.store();
}

void layernorm_backward(const DeviceContext& ctx, Tensor dx, Tensor dweight, Tensor dbias,
                        Tensor dout, Tensor x, Tensor weight, Tensor mean, Tensor rstd) {
  constexpr const char* kOp = "layernorm_backward";
  const bool on_device = detail::on_cuda(kOp, ctx,
                                         {{"dx", dx},
                                          {"dweight", dweight},
                                          {"dbias", dbias},
                                          {"dout", dout},
                                          {"x", x},
                                          {"weight", weight},
                                          {"mean", mean},
                                          {"rstd", rstd}});
  const DType dtype = detail::activation_dtype(kOp, {"x", x}, {{"dx", dx}, {"dout", dout}});
  const DType param_dtype = detail::parameter_dtype(kOp, {"x", x}, {"weight", weight}, {});
  const std::int64_t rows = check_common(kOp, x, weight, mean, rstd);
  detail::expect_shape(kOp, {"dx", dx}, x.shape());
  detail::expect_shape(kOp, {"dout", dout}, x.shape());
  float* dweight_ptr = nullptr;
  float* dbias_ptr = nullptr;
  if (detail::given(dweight)) {
    detail::expect_dtype(kOp, {"dweight", dweight}, DType::kFloat32);
    detail::expect_shape(kOp, {"dweight", dweight}, weight.shape());
    dweight_ptr = dweight.data<float>();
  }
  if (detail::given(dbias)) {
    detail::expect_dtype(kOp, {"dbias", dbias}, DType::kFloat32);
    detail::expect_shape(kOp, {"dbias", dbias}, weight.shape());
    dbias_ptr = dbias.data<float>();
  }
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::layernorm_backward(ctx, dx.raw(), dweight_ptr, dbias_ptr, dout.raw(), x.raw(),
                               weight.raw(), mean.data<float>(), rstd.data<float>(), dtype,
                               param_dtype, rows, weight.dim(0));
    }
    return;
  }
  const cpu::Fp32View vdx(dx), vdout(dout), vx(x), vweight(weight);
  cpu::layernorm_backward(vdx.data(), dweight_ptr, dbias_ptr, vdout.data(), vx.data(),
                          vweight.data(), mean.data<float>(), rstd.data<float>(), rows,
                          weight.dim(0));
  vdx.store();
}

void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight, Tensor bias,
                       float eps) {
  layernorm_forward(DeviceContext{}, out, mean, rstd, x, weight, bias, eps);
}

void layernorm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                        Tensor weight, Tensor mean, Tensor rstd) {
  layernorm_backward(DeviceContext{}, dx, dweight, dbias, dout, x, weight, mean, rstd);
}

}  // namespace mds::ops
