// The 16-bit activation variants on a device (the public ops with a CUDA context, through
// ops/cuda to the kernels templated on the storage) against the same ops on host tensors, their
// CPU twins (which the unit tests tie to the fp32 op followed by one rounding). Device outputs
// start poisoned (0xFFFF: a NaN in bf16 and fp16) unless the op accumulates into them.
//
// Bounds: bit-identical where the arithmetic is identical (add, scale, dropout, bias-dropout-add's
// dx and dresidual, the embedding lookups, the embedding backward's fp32 dtable). LayerNorm and
// GeLU outputs differ only by the transcendentals and the summation order in fp32 (about 1e-6
// relative), so after rounding they are at most one ulp of the 16-bit type apart, except where
// the fp32 result is near zero (cancellation: there a 16-bit ulp is smaller than the fp32
// difference), which is allowed an absolute 1e-4·rms(reference). fp32 statistics and parameter
// gradients keep the fp32 kernels' bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/layernorm.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "tests/gpu/device_tensors.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/half_util.h"

namespace mds {
namespace {

using gpu_test::expect_identical;
using gpu_test::expect_one_ulp;
using gpu_test::halves;
using gpu_test::Mirrored;
using gpu_test::poisoned;
using gpu_test::random_floats;
using ops::DeviceContext;
using tensor::Shape;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};

template <typename T>
class Activations16OnDevice : public ::testing::Test {};
using gpu_test::HalfTypes;
TYPED_TEST_SUITE(Activations16OnDevice, HalfTypes);

// Dx::kOverwrite on a device: `backward(dx, dbias, mode)` run from NaNs writes every element of dx
// with the values it gives accumulating onto zeros (as numbers: a −0 may stay −0 where 0 + −0
// gives +0) and adds the same into dbias.
template <typename T>
void expect_overwrite_as_onto_zeros(
    const DeviceContext& ctx, const Shape& shape,
    const std::function<void(tensor::Tensor, tensor::Tensor, ops::Dx)>& backward,
    const std::string& what) {
  const auto n = static_cast<std::size_t>(shape.numel());
  const std::int64_t cols = shape[1];
  Mirrored<T> onto_zeros(ctx, std::vector<T>(n, T{0}), shape), written(ctx, poisoned<T>(n), shape);
  const std::vector<float> dbias0(static_cast<std::size_t>(cols), 0.5f);
  Mirrored<float> dbias_a(ctx, dbias0, {cols}), dbias_b(ctx, dbias0, {cols});
  backward(onto_zeros.d, dbias_a.d, ops::Dx::kAccumulate);
  backward(written.d, dbias_b.d, ops::Dx::kOverwrite);
  const std::vector<T> a = written.download(ctx), b = onto_zeros.download(ctx);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) differ += !(tensor::to_float(a[i]) == tensor::to_float(b[i]));
  EXPECT_EQ(differ, 0u) << what << " overwrite";
  EXPECT_EQ(dbias_a.download(ctx), dbias_b.download(ctx)) << what << " overwrite dbias";
}

TYPED_TEST(Activations16OnDevice, AddAndScaleAreBitIdentical) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  for (const std::int64_t n : gpu_test::flat_sizes()) {
    const auto un = static_cast<std::size_t>(n);
    const std::string what = "n=" + std::to_string(n);
    Mirrored<T> a(ctx, halves<T>(un, 1), {n}), b(ctx, halves<T>(un, 2), {n});
    Mirrored<T> out(ctx, poisoned<T>(un), {n});
    ops::add(out.h, a.h, b.h);
    ops::add(ctx, out.d, a.d, b.d);
    expect_identical(ctx, out, "add " + what);
    ops::scale(out.h, a.h, 0.37f);
    ops::scale(ctx, out.d, a.d, 0.37f);
    expect_identical(ctx, out, "scale " + what);
  }
}

TYPED_TEST(Activations16OnDevice, DropoutAndBiasDropoutAdd) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  const ops::DropoutStream stream{0.1f, 77, 5};
  for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
    const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
    const Shape shape{rows, cols};
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    Mirrored<T> x(ctx, halves<T>(n, 3), shape), residual(ctx, halves<T>(n, 4), shape);
    Mirrored<T> out(ctx, poisoned<T>(n), shape), dout(ctx, halves<T>(n, 5), shape);
    Mirrored<T> dx(ctx, halves<T>(n, 6), shape), dresidual(ctx, halves<T>(n, 7), shape);
    Mirrored<float> bias(ctx, random_floats(uc, 8), {cols}),
        dbias(ctx, random_floats(uc, 9), {cols});
    ops::dropout_forward(out.h, x.h, stream);
    ops::dropout_forward(ctx, out.d, x.d, stream);
    expect_identical(ctx, out, "dropout " + what);
    ops::bias_dropout_add_forward(out.h, x.h, bias.h, residual.h, stream);
    ops::bias_dropout_add_forward(ctx, out.d, x.d, bias.d, residual.d, stream);
    expect_identical(ctx, out, "bias_dropout_add " + what);
    ops::bias_dropout_add_backward(dx.h, dbias.h, dresidual.h, dout.h, stream);
    ops::bias_dropout_add_backward(ctx, dx.d, dbias.d, dresidual.d, dout.d, stream);
    expect_identical(ctx, dx, "bias_dropout_add dx " + what);
    expect_identical(ctx, dresidual, "bias_dropout_add dresidual " + what);
    EXPECT_FP32_CLOSE(ctx, dbias, 1e-5);
    ops::dropout_backward(dx.h, dout.h, stream);
    ops::dropout_backward(ctx, dx.d, dout.d, stream);
    expect_identical(ctx, dx, "dropout dx " + what);
    expect_overwrite_as_onto_zeros<T>(
        ctx, shape,
        [&](tensor::Tensor into, tensor::Tensor dbias_into, ops::Dx mode) {
          ops::bias_dropout_add_backward(ctx, into, dbias_into, {}, dout.d, stream, mode);
        },
        "bias_dropout_add " + what);
  }
}

TYPED_TEST(Activations16OnDevice, LayerNormWithinOneUlp) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
    const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
    const auto ur = static_cast<std::size_t>(rows);
    const Shape shape{rows, cols};
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    // An offset mean, as activations have, so the two-pass variance matters.
    Mirrored<T> x(ctx, halves<T>(n, 10, 1.0f, 4.0f), shape), out(ctx, poisoned<T>(n), shape);
    Mirrored<T> dout(ctx, halves<T>(n, 11), shape), dx(ctx, halves<T>(n, 12), shape);
    Mirrored<float> weight(ctx, random_floats(uc, 13), {cols}),
        bias(ctx, random_floats(uc, 14), {cols});
    Mirrored<float> mean(ctx, std::vector<float>(ur), {rows}),
        rstd(ctx, std::vector<float>(ur), {rows});
    Mirrored<float> dweight(ctx, random_floats(uc, 15), {cols});
    Mirrored<float> dbias(ctx, random_floats(uc, 16), {cols});
    ops::layernorm_forward(out.h, mean.h, rstd.h, x.h, weight.h, bias.h, 1e-5f);
    ops::layernorm_forward(ctx, out.d, mean.d, rstd.d, x.d, weight.d, bias.d, 1e-5f);
    expect_one_ulp(ctx, out, "layernorm " + what);
    EXPECT_FP32_CLOSE(ctx, mean, 1e-6);
    EXPECT_FP32_CLOSE(ctx, rstd, 1e-5);
    // The backward from the host statistics on both sides.
    tensor::copy(mean.d, mean.h);
    tensor::copy(rstd.d, rstd.h);
    ops::layernorm_backward(dx.h, dweight.h, dbias.h, dout.h, x.h, weight.h, mean.h, rstd.h);
    ops::layernorm_backward(ctx, dx.d, dweight.d, dbias.d, dout.d, x.d, weight.d, mean.d, rstd.d);
    expect_one_ulp(ctx, dx, "layernorm dx " + what);
    EXPECT_FP32_CLOSE(ctx, dweight, 1e-5);
    EXPECT_FP32_CLOSE(ctx, dbias, 1e-5);
  }
}

TYPED_TEST(Activations16OnDevice, ResidualLayerNormKernel) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  const tensor::DType dtype = tensor::dtype_of<T>();
  for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
    const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
    const auto ur = static_cast<std::size_t>(rows);
    const Shape shape{rows, cols};
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    Mirrored<T> x(ctx, halves<T>(n, 17, -1.0f, 1.0f), shape);
    Mirrored<T> residual(ctx, halves<T>(n, 18, 1.0f, 4.0f), shape);
    Mirrored<T> sum(ctx, poisoned<T>(n), shape), out(ctx, poisoned<T>(n), shape);
    Mirrored<float> weight(ctx, random_floats(uc, 19), {cols}),
        bias(ctx, random_floats(uc, 20), {cols});
    Mirrored<float> mean(ctx, std::vector<float>(ur), {rows}),
        rstd(ctx, std::vector<float>(ur), {rows});
    // The CPU twin: the rounded sum, then LayerNorm of it.
    ops::add(sum.h, x.h, residual.h);
    ops::layernorm_forward(out.h, mean.h, rstd.h, sum.h, weight.h, bias.h, 1e-5f);
    kernels::residual_layernorm_forward(
        sum.d.raw(), out.d.raw(), mean.d.template data<float>(), rstd.d.template data<float>(),
        x.d.raw(), residual.d.raw(), weight.d.template data<float>(), bias.d.template data<float>(),
        dtype, rows, cols, 1e-5f, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_identical(ctx, sum, "residual sum " + what);
    expect_one_ulp(ctx, out, "residual layernorm " + what);
    EXPECT_FP32_CLOSE(ctx, mean, 1e-6);
    EXPECT_FP32_CLOSE(ctx, rstd, 1e-5);
  }
}

TYPED_TEST(Activations16OnDevice, GeluEveryKindWithinOneUlp) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  for (const ops::GeluKind kind :
       {ops::GeluKind::kTanhFused, ops::GeluKind::kTanhOpenAI, ops::GeluKind::kErf}) {
    for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
      const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
      const Shape shape{rows, cols};
      const std::string what = std::to_string(static_cast<int>(kind)) + " " + std::to_string(rows) +
                               "x" + std::to_string(cols);
      Mirrored<T> x(ctx, halves<T>(n, 21), shape), out(ctx, poisoned<T>(n), shape);
      Mirrored<T> dout(ctx, halves<T>(n, 22), shape), dx(ctx, halves<T>(n, 23), shape);
      Mirrored<float> bias(ctx, random_floats(uc, 24), {cols});
      Mirrored<float> dbias(ctx, random_floats(uc, 25), {cols});
      ops::gelu_forward(out.h, x.h, kind);
      ops::gelu_forward(ctx, out.d, x.d, kind);
      expect_one_ulp(ctx, out, "gelu " + what);
      ops::bias_gelu_forward(out.h, x.h, bias.h, kind);
      ops::bias_gelu_forward(ctx, out.d, x.d, bias.d, kind);
      expect_one_ulp(ctx, out, "bias_gelu " + what);
      ops::bias_gelu_backward(dx.h, dbias.h, dout.h, x.h, bias.h, kind);
      ops::bias_gelu_backward(ctx, dx.d, dbias.d, dout.d, x.d, bias.d, kind);
      expect_one_ulp(ctx, dx, "bias_gelu dx " + what);
      EXPECT_FP32_CLOSE(ctx, dbias, 1e-5);
      expect_overwrite_as_onto_zeros<T>(
          ctx, shape,
          [&](tensor::Tensor into, tensor::Tensor dbias_into, ops::Dx mode) {
            ops::bias_gelu_backward(ctx, into, dbias_into, dout.d, x.d, bias.d, kind, mode);
          },
          "bias_gelu " + what);
      // From equal dx again: the next step must not inherit an ulp of difference.
      tensor::copy(dx.d, dx.h);
      ops::gelu_backward(dx.h, dout.h, x.h, kind);
      ops::gelu_backward(ctx, dx.d, dout.d, x.d, kind);
      expect_one_ulp(ctx, dx, "gelu dx " + what);
    }
  }
}

TYPED_TEST(Activations16OnDevice, EmbeddingIsBitIdentical) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  constexpr std::int64_t kV = 50, kP = 16, kN = 37;
  for (const std::int64_t h : {1, 64, 257, 768}) {
    const auto uh = static_cast<std::size_t>(h), count = static_cast<std::size_t>(kN * h);
    const Shape shape{kN, h};
    const std::string what = "h=" + std::to_string(h);
    std::vector<std::int64_t> token_ids, position_ids;
    for (std::int64_t t = 0; t < kN; ++t) {
      token_ids.push_back((t * 7) % kV);
      position_ids.push_back(t % kP);
    }
    Mirrored<std::int64_t> tokens(ctx, token_ids, {kN}), positions(ctx, position_ids, {kN});
    Mirrored<float> wte(ctx, random_floats(kV * uh, 26), {kV, h});
    Mirrored<float> wpe(ctx, random_floats(kP * uh, 27), {kP, h});
    Mirrored<float> shard(ctx, random_floats(20 * uh, 28), {20, h});
    Mirrored<T> out(ctx, poisoned<T>(count), shape), dout(ctx, halves<T>(count, 29), shape);
    Mirrored<float> dtable(ctx, random_floats(kV * uh, 30), {kV, h});
    ops::embedding_lookup(out.h, tokens.h, shard.h, 10, kV);
    ops::embedding_lookup(ctx, out.d, tokens.d, shard.d, 10, kV);
    expect_identical(ctx, out, "lookup (shard [10, 30)) " + what);
    ops::embedding_lookup_add(out.h, positions.h, wpe.h);
    ops::embedding_lookup_add(ctx, out.d, positions.d, wpe.d);
    expect_identical(ctx, out, "lookup_add " + what);
    ops::embedding_forward(out.h, tokens.h, wte.h, positions.h, wpe.h);
    ops::embedding_forward(ctx, out.d, tokens.d, wte.d, positions.d, wpe.d);
    expect_identical(ctx, out, "forward " + what);
    ops::embedding_backward(dtable.h, dout.h, tokens.h);
    ops::embedding_backward(ctx, dtable.d, dout.d, tokens.d);
    EXPECT_EQ(dtable.download(ctx), dtable.host) << "backward " << what;
  }
}

}  // namespace
}  // namespace mds
