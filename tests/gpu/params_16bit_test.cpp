// The ops that read a model's non-GEMM parameters (LayerNorm weight and bias, the biases of
// bias-GeLU and bias-dropout-add, the embedding tables; kernels::residual_layernorm_forward) and
// the sums of squares of the parameter norm, on a device, given those parameters in the
// activations' 16-bit dtype (a 16-bit model without an fp32 compute copy) against the same ops on
// the same device given the parameters widened to fp32: every output, fp32 statistics and
// parameter gradients included, bit for bit. The kernels' two instances differ only in how a
// parameter is loaded, and a 16-bit value widens exactly, so the arithmetic after the load is the
// same statement by statement, in the same order. With Activations16OnDevice (device against host,
// fp32 parameters) and the unit tests Ops16BitParams (host, 16-bit against widened parameters),
// this ties the device's 16-bit-parameter path to the host's. Never run: no GPU was available.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/layernorm.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/gradients.h"
#include "ops/layernorm.h"
#include "tests/gpu/device_tensors.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/half_util.h"

namespace mds {
namespace {

using gpu_test::bits;
using gpu_test::halves;
using gpu_test::Mirrored;
using gpu_test::poisoned;
using gpu_test::random_floats;
using ops::DeviceContext;
using tensor::Shape;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};

template <typename T>
std::vector<float> widened(const std::vector<T>& v) {
  std::vector<float> out;
  for (const T x : v) out.push_back(tensor::to_float(x));
  return out;
}

// A parameter as a 16-bit model holds it on the device, and its fp32 widening.
template <typename T>
struct Param {
  Param(const DeviceContext& ctx, std::size_t n, std::uint32_t seed, Shape shape)
      : low(ctx, halves<T>(n, seed), shape), wide(ctx, widened(low.host), shape) {}
  Mirrored<T> low;
  Mirrored<float> wide;
};

// Two device outputs of the same op, one per parameter dtype: the same bits.
template <typename T>
void expect_same_bits(const DeviceContext& ctx, const Mirrored<T>& a, const Mirrored<T>& b,
                      const std::string& what) {
  if constexpr (std::is_same_v<T, float>) {
    const std::vector<float> x = a.download(ctx), y = b.download(ctx);
    ASSERT_EQ(x.size(), y.size()) << what;
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << what;
    EXPECT_EQ(gpu_test::non_finite(x), 0u) << what;
  } else {
    const std::vector<T> x = a.download(ctx);
    EXPECT_EQ(bits(x), bits(b.download(ctx))) << what;
    for (const T v : x) ASSERT_TRUE(std::isfinite(tensor::to_float(v))) << what << " unwritten";
  }
}

template <typename T>
class Params16OnDevice : public ::testing::Test {};
using gpu_test::HalfTypes;
TYPED_TEST_SUITE(Params16OnDevice, HalfTypes);

TYPED_TEST(Params16OnDevice, LayerNormIsBitIdenticalToTheWidenedParams) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
    const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
    const auto ur = static_cast<std::size_t>(rows);
    const Shape shape{rows, cols}, row{cols};
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    Mirrored<T> x(ctx, halves<T>(n, 1, 1.0f, 4.0f), shape), dout(ctx, halves<T>(n, 2), shape);
    Param<T> weight(ctx, uc, 3, row), bias(ctx, uc, 4, row);
    Mirrored<T> out16(ctx, poisoned<T>(n), shape), out32(ctx, poisoned<T>(n), shape);
    Mirrored<float> mean16(ctx, std::vector<float>(ur), {rows}),
        mean32(ctx, std::vector<float>(ur), {rows});
    Mirrored<float> rstd16(ctx, std::vector<float>(ur), {rows}),
        rstd32(ctx, std::vector<float>(ur), {rows});
    ops::layernorm_forward(ctx, out16.d, mean16.d, rstd16.d, x.d, weight.low.d, bias.low.d, 1e-5f);
    ops::layernorm_forward(ctx, out32.d, mean32.d, rstd32.d, x.d, weight.wide.d, bias.wide.d,
                           1e-5f);
    expect_same_bits(ctx, out16, out32, "layernorm out " + what);
    expect_same_bits(ctx, mean16, mean32, "layernorm mean " + what);
    expect_same_bits(ctx, rstd16, rstd32, "layernorm rstd " + what);

    const std::vector<T> dx0 = halves<T>(n, 5);
    Mirrored<T> dx16(ctx, dx0, shape), dx32(ctx, dx0, shape);
    Mirrored<float> dweight16(ctx, random_floats(uc, 6), row), dweight32(ctx, dweight16.host, row);
    Mirrored<float> dbias16(ctx, random_floats(uc, 7), row), dbias32(ctx, dbias16.host, row);
    ops::layernorm_backward(ctx, dx16.d, dweight16.d, dbias16.d, dout.d, x.d, weight.low.d,
                            mean32.d, rstd32.d);
    ops::layernorm_backward(ctx, dx32.d, dweight32.d, dbias32.d, dout.d, x.d, weight.wide.d,
                            mean32.d, rstd32.d);
    expect_same_bits(ctx, dx16, dx32, "layernorm dx " + what);
    expect_same_bits(ctx, dweight16, dweight32, "layernorm dweight " + what);
    expect_same_bits(ctx, dbias16, dbias32, "layernorm dbias " + what);

    // The residual LayerNorm kernel (no public op) with the same parameters.
    Mirrored<T> residual(ctx, halves<T>(n, 8), shape);
    Mirrored<T> sum16(ctx, poisoned<T>(n), shape), sum32(ctx, poisoned<T>(n), shape);
    const auto dtype = tensor::dtype_of<T>();
    kernels::residual_layernorm_forward(sum16.d.raw(), out16.d.raw(), mean16.d.data<float>(),
                                        rstd16.d.data<float>(), x.d.raw(), residual.d.raw(),
                                        weight.low.d.raw(), bias.low.d.raw(), dtype, dtype, rows,
                                        cols, 1e-5f, nullptr);
    kernels::residual_layernorm_forward(sum32.d.raw(), out32.d.raw(), mean32.d.data<float>(),
                                        rstd32.d.data<float>(), x.d.raw(), residual.d.raw(),
                                        weight.wide.d.raw(), bias.wide.d.raw(), dtype,
                                        tensor::DType::kFloat32, rows, cols, 1e-5f, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_same_bits(ctx, sum16, sum32, "residual layernorm sum " + what);
    expect_same_bits(ctx, out16, out32, "residual layernorm out " + what);
  }
}

TYPED_TEST(Params16OnDevice, BiasGeluAndBiasDropoutAddAreBitIdenticalToTheWidenedBias) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  const ops::DropoutStream stream{0.1f, 77, 5};
  for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
    const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
    const Shape shape{rows, cols}, row{cols};
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    Mirrored<T> x(ctx, halves<T>(n, 10), shape), dout(ctx, halves<T>(n, 11), shape);
    Mirrored<T> residual(ctx, halves<T>(n, 12), shape);
    Param<T> bias(ctx, uc, 13, row);
    Mirrored<T> out16(ctx, poisoned<T>(n), shape), out32(ctx, poisoned<T>(n), shape);
    for (const ops::GeluKind kind :
         {ops::GeluKind::kTanhFused, ops::GeluKind::kTanhOpenAI, ops::GeluKind::kErf}) {
      const std::string which = what + " kind " + std::to_string(static_cast<int>(kind));
      ops::bias_gelu_forward(ctx, out16.d, x.d, bias.low.d, kind);
      ops::bias_gelu_forward(ctx, out32.d, x.d, bias.wide.d, kind);
      expect_same_bits(ctx, out16, out32, "bias_gelu " + which);
      const std::vector<T> dx0 = halves<T>(n, 14);
      Mirrored<T> dx16(ctx, dx0, shape), dx32(ctx, dx0, shape);
      Mirrored<float> dbias16(ctx, random_floats(uc, 15), row), dbias32(ctx, dbias16.host, row);
      ops::bias_gelu_backward(ctx, dx16.d, dbias16.d, dout.d, x.d, bias.low.d, kind);
      ops::bias_gelu_backward(ctx, dx32.d, dbias32.d, dout.d, x.d, bias.wide.d, kind);
      expect_same_bits(ctx, dx16, dx32, "bias_gelu dx " + which);
      expect_same_bits(ctx, dbias16, dbias32, "bias_gelu dbias " + which);
      ops::bias_gelu_backward(ctx, dx16.d, {}, dout.d, x.d, bias.low.d, kind);
      ops::bias_gelu_backward(ctx, dx32.d, {}, dout.d, x.d, bias.wide.d, kind);
      expect_same_bits(ctx, dx16, dx32, "bias_gelu dx without dbias " + which);
    }
    ops::bias_dropout_add_forward(ctx, out16.d, x.d, bias.low.d, residual.d, stream);
    ops::bias_dropout_add_forward(ctx, out32.d, x.d, bias.wide.d, residual.d, stream);
    expect_same_bits(ctx, out16, out32, "bias_dropout_add " + what);
  }
}

TYPED_TEST(Params16OnDevice, EmbeddingIsBitIdenticalToTheWidenedTables) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  constexpr std::int64_t kV = 50257, kPositions = 64, kStart = 20000, kRows = 12000;
  for (const std::int64_t h : {1, 257, 768}) {
    const std::int64_t n = 300;
    const auto count = static_cast<std::size_t>(n * h);
    const Shape shape{n, h}, tokens{n};
    const std::string what = "h=" + std::to_string(h);
    std::vector<std::int64_t> id_values, position_values;
    for (std::int64_t t = 0; t < n; ++t) {
      id_values.push_back((t * 7919) % kV);
      position_values.push_back(t % kPositions);
    }
    Mirrored<std::int64_t> ids(ctx, id_values, tokens), positions(ctx, position_values, tokens);
    Param<T> wte(ctx, static_cast<std::size_t>(kV * h), 20, {kV, h});
    Param<T> wpe(ctx, static_cast<std::size_t>(kPositions * h), 21, {kPositions, h});
    // A vocab shard [kStart, kStart + kRows): other ids give zeros.
    Param<T> shard(ctx, static_cast<std::size_t>(kRows * h), 22, {kRows, h});
    Mirrored<T> out16(ctx, poisoned<T>(count), shape), out32(ctx, poisoned<T>(count), shape);
    ops::embedding_lookup(ctx, out16.d, ids.d, shard.low.d, kStart, kV);
    ops::embedding_lookup(ctx, out32.d, ids.d, shard.wide.d, kStart, kV);
    expect_same_bits(ctx, out16, out32, "lookup of a shard " + what);
    ops::embedding_lookup_add(ctx, out16.d, positions.d, wpe.low.d);
    ops::embedding_lookup_add(ctx, out32.d, positions.d, wpe.wide.d);
    expect_same_bits(ctx, out16, out32, "lookup_add " + what);
    ops::embedding_forward(ctx, out16.d, ids.d, wte.low.d, positions.d, wpe.low.d);
    ops::embedding_forward(ctx, out32.d, ids.d, wte.wide.d, positions.d, wpe.wide.d);
    expect_same_bits(ctx, out16, out32, "token + position " + what);
  }
}

TYPED_TEST(Params16OnDevice, SumsOfSquaresAreBitIdenticalToTheWidenedWeights) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  constexpr std::int64_t kN = 300000;
  Param<T> weights(ctx, static_cast<std::size_t>(kN), 30, {kN});
  // Whole, empty, one element, odd offsets, block-straddling: what a parameter table gives.
  const std::vector<ops::SquaresSegment> segments = {{0, kN},    {7, 0},    {63, 1},
                                                     {101, 513}, {3, 4099}, {kN - 65537, 65537}};
  const std::vector<double> got = ops::sums_of_squares(ctx, weights.low.d, segments);
  const std::vector<double> want = ops::sums_of_squares(ctx, weights.wide.d, segments);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(double)), 0);
  // And within 1e-12 of the host's sums (another fixed order), as the fp32 sums are.
  const std::vector<double> host = ops::sums_of_squares(DeviceContext{}, weights.low.h, segments);
  for (std::size_t k = 0; k < host.size(); ++k) {
    EXPECT_NEAR(got[k], host[k], 1e-12 * (host[k] > 1.0 ? host[k] : 1.0)) << k;
  }
}

}  // namespace
}  // namespace mds
