// The flash attention with bf16/fp16 activations on a device (ops::flash_attention_forward and
// _backward with a CUDA context, through ops/cuda to the kernels' 16-bit storage) against the
// host's 16-bit attention (the probabilities path on host tensors, which the unit tests tie to the
// fp32 ops followed by one rounding). ctx starts poisoned (0xFFFF: a NaN in bf16 and fp16), lse
// with NaN; dqkv starts from small nonzero values (the backward accumulates).
//
// Bounds. ctx and dv: fp32 math on the same 16-bit inputs in another summation order (online
// softmax, tiles), so at most one 16-bit ulp apart, or within 1e-4·rms(host) where the host value
// is near zero (tests/gpu/activations_16bit_test.cpp's rule). lse: the fp32 kernels' bound against
// the definition in double on the widened qkv. dq and dk: the kernels' delta = dctx·ctx reads the
// 16-bit ctx, the host's softmax backward sums p·dp in fp32, and the difference survives the
// cancellation in dp − delta: bounded in norm by 2u (u the unit roundoff; under the CPU emulation,
// tests/unit/kernels_emulated_attention_test.cpp, it measured below u). At head dims 64 and 128
// the ops run the tensor-core kernels, which round P and dS to 16 bits: there the elementwise
// bounds of tests/unit/attention_tc_bounds.h apply instead. The decode attention over a 16-bit
// cache: the cache bit for bit, the context within one ulp as ctx.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "kernels/attention.h"
#include "ops/attention.h"
#include "tests/gpu/device_tensors.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/half_util.h"
#include "tests/unit/attention_tc_bounds.h"

namespace mds {
namespace {

using gpu_test::halves;
using gpu_test::Mirrored;
using gpu_test::ordered;
using gpu_test::random_floats;
using ops::DeviceContext;
using tensor::Shape;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};

struct Case {
  std::int64_t s, b, np, hn;
  float coeff;
  float p = 0.0f;  // attention dropout
  ops::HeadRange heads = {};
};
// One token, across the 32-row tile, several heads, coeff > 1, every compiled head dim, dropout
// with a TP shard's head range.
const Case kCases[] = {
    {1, 1, 1, 8, 1.0f},     {33, 2, 2, 8, 2.0f},        {31, 1, 3, 16, 1.0f},
    {65, 2, 1, 32, 1.0f},   {257, 1, 2, 64, 1.0f},      {100, 1, 2, 96, 3.0f},
    {129, 1, 1, 128, 1.0f}, {70, 2, 2, 64, 1.0f, 0.1f}, {97, 1, 2, 16, 2.0f, 0.5f, {1, 4}}};

template <typename T>
std::vector<std::uint16_t> bits16(const std::vector<T>& v) {
  std::vector<std::uint16_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(T));
  return out;
}

template <typename T>
std::vector<float> widened(const std::vector<T>& v) {
  std::vector<float> out;
  for (const T x : v) out.push_back(tensor::to_float(x));
  return out;
}

// Elements [first + k·stride, first + k·stride + width) of got and want: at most one ulp of T
// apart, or within 1e-4·rms(want) where want is near zero.
template <typename T>
void expect_one_ulp(const std::vector<T>& got, const std::vector<T>& want, std::size_t first,
                    std::size_t width, std::size_t stride, const std::string& what) {
  double sq = 0.0;
  for (const T x : want) sq += static_cast<double>(tensor::to_float(x)) * tensor::to_float(x);
  const double floor = 1e-4 * std::sqrt(sq / static_cast<double>(want.size() + 1));
  for (std::size_t base = first; base < got.size(); base += stride) {
    for (std::size_t i = base; i < base + width; ++i) {
      const float g = tensor::to_float(got[i]), w = tensor::to_float(want[i]);
      ASSERT_TRUE(std::isfinite(g)) << what << " at " << i << " (left unwritten?)";
      if (std::abs(ordered(got[i].bits) - ordered(want[i].bits)) <= 1) continue;
      ASSERT_LE(std::fabs(static_cast<double>(g) - w), floor)
          << what << " at " << i << ": device " << g << ", host " << w;
    }
  }
}

// log Σ_{j ≤ i} exp(z_ij) of every (batch, head, query) row in double, z = coeff·α·q·k.
std::vector<float> reference_lse(const std::vector<float>& qkv, const Case& c) {
  const double alpha = 1.0 / (std::sqrt(static_cast<double>(c.hn)) * c.coeff);
  const std::int64_t ld = c.b * c.np * 3 * c.hn;
  std::vector<float> lse(static_cast<std::size_t>(c.b * c.np * c.s));
  for (std::int64_t bh = 0; bh < c.b * c.np; ++bh) {
    for (std::int64_t i = 0; i < c.s; ++i) {
      std::vector<double> z;
      double max = -INFINITY, sum = 0.0;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0.0;
        for (std::int64_t d = 0; d < c.hn; ++d) {
          dot += static_cast<double>(qkv[static_cast<std::size_t>(i * ld + bh * 3 * c.hn + d)]) *
                 qkv[static_cast<std::size_t>(j * ld + bh * 3 * c.hn + c.hn + d)];
        }
        z.push_back(c.coeff * alpha * dot);
        max = std::max(max, z.back());
      }
      for (const double v : z) sum += std::exp(v - max);
      lse[static_cast<std::size_t>(bh * c.s + i)] = static_cast<float>(max + std::log(sum));
    }
  }
  return lse;
}

template <typename T>
class Attention16OnDevice : public ::testing::Test {};
using HalfTypes = ::testing::Types<tensor::BFloat16, tensor::Float16>;
TYPED_TEST_SUITE(Attention16OnDevice, HalfTypes);

TYPED_TEST(Attention16OnDevice, FlashAttentionMatchesHost16BitAttention) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0);
  for (const Case& c : kCases) {
    const std::string what = "s=" + std::to_string(c.s) + " b=" + std::to_string(c.b) +
                             " np=" + std::to_string(c.np) + " hn=" + std::to_string(c.hn) +
                             " p=" + std::to_string(c.p);
    SCOPED_TRACE(what);
    const Shape qkv_shape{c.s, c.b, c.np * 3 * c.hn}, ctx_shape{c.s, c.b, c.np * c.hn};
    const Shape probs_shape{c.b, c.np, c.s, c.s}, lse_shape{c.b, c.np, c.s};
    const auto qkv_n = static_cast<std::size_t>(qkv_shape.numel());
    const auto ctx_n = static_cast<std::size_t>(ctx_shape.numel());
    const auto probs_n = static_cast<std::size_t>(probs_shape.numel());
    Mirrored<T> qkv(ctx, halves<T>(qkv_n, 30, -2.0f, 2.0f), qkv_shape);
    Mirrored<T> dctx(ctx, halves<T>(ctx_n, 31, -1.0f, 1.0f), ctx_shape);
    Mirrored<T> context(ctx, std::vector<T>(ctx_n, T{0xFFFF}), ctx_shape);
    Mirrored<T> dqkv(ctx, halves<T>(qkv_n, 32, -0.01f, 0.01f), qkv_shape);
    Mirrored<float> lse(ctx, std::vector<float>(static_cast<std::size_t>(lse_shape.numel()), NAN),
                        lse_shape);
    const ops::DropoutStream dropout{c.p, 0x5EEDull, 19};

    // The host's 16-bit attention, in the host halves of context and dqkv.
    std::vector<float> probs(probs_n), dprobs(probs_n), dropped(probs_n);
    const auto fp32 = [](std::vector<float>& v, const Shape& shape) {
      return tensor::Tensor(v.data(), tensor::DType::kFloat32, shape);
    };
    ops::attention_probs_forward(fp32(probs, probs_shape), qkv.h, c.coeff);
    if (c.p == 0.0f) {
      ops::attention_context_forward(context.h, fp32(probs, probs_shape), qkv.h);
      ops::attention_context_backward(fp32(dprobs, probs_shape), dqkv.h, dctx.h,
                                      fp32(probs, probs_shape), qkv.h);
    } else {
      ops::attention_context_forward_with_dropout(
          context.h, fp32(dropped, probs_shape), fp32(probs, probs_shape), qkv.h, dropout, c.heads);
      ops::attention_context_backward_with_dropout(
          fp32(dprobs, probs_shape), dqkv.h, fp32(dropped, probs_shape), dctx.h,
          fp32(probs, probs_shape), qkv.h, dropout, c.heads);
    }
    ops::attention_probs_backward(dqkv.h, fp32(dprobs, probs_shape), fp32(probs, probs_shape),
                                  qkv.h, c.coeff);

    ops::flash_attention_forward(ctx, context.d, lse.d, qkv.d, c.coeff, dropout, c.heads);
    MDS_EXPECT_CLOSE(lse.download(ctx), reference_lse(widened(qkv.host), c), 1e-6);
    ops::flash_attention_backward(ctx, dqkv.d, dctx.d, context.d, lse.d, qkv.d, c.coeff, dropout,
                                  c.heads);
    const std::vector<T> got = dqkv.download(ctx);
    // Dx::kOverwrite (tensor-core kernels: no read of dqkv; SIMT: onto a zero fill): from NaNs,
    // the values of accumulating onto zeros (as numbers: a −0 may stay −0).
    Mirrored<T> onto_zeros(ctx, std::vector<T>(qkv_n, T{0}), qkv_shape);
    Mirrored<T> written(ctx, std::vector<T>(qkv_n, T{0xFFFF}), qkv_shape);
    ops::flash_attention_backward(ctx, onto_zeros.d, dctx.d, context.d, lse.d, qkv.d, c.coeff,
                                  dropout, c.heads);
    ops::flash_attention_backward(ctx, written.d, dctx.d, context.d, lse.d, qkv.d, c.coeff, dropout,
                                  c.heads, ops::Dx::kOverwrite);
    EXPECT_EQ(widened(written.download(ctx)), widened(onto_zeros.download(ctx))) << "overwrite";
    if (c.p > 0.0f) {
      // With keep bits (tensor-core kernels: read by the backward; SIMT: written, not read): the
      // same bits out of both halves.
      const Shape keep_shape = ops::flash_attention_keep_bits_shape(c.b, c.np, c.s);
      Mirrored<std::int32_t> keep(
          ctx, std::vector<std::int32_t>(static_cast<std::size_t>(keep_shape.numel()), -1),
          keep_shape);
      Mirrored<T> context_kept(ctx, std::vector<T>(ctx_n, T{0xFFFF}), ctx_shape);
      Mirrored<float> lse_kept(
          ctx, std::vector<float>(static_cast<std::size_t>(lse_shape.numel()), NAN), lse_shape);
      Mirrored<T> dqkv_kept(ctx, std::vector<T>(qkv_n, T{0xFFFF}), qkv_shape);
      ops::flash_attention_forward(ctx, context_kept.d, lse_kept.d, qkv.d, c.coeff, dropout,
                                   c.heads, keep.d);
      ops::flash_attention_backward(ctx, dqkv_kept.d, dctx.d, context_kept.d, lse_kept.d, qkv.d,
                                    c.coeff, dropout, c.heads, ops::Dx::kOverwrite, keep.d);
      EXPECT_EQ(bits16(context_kept.download(ctx)), bits16(context.download(ctx))) << "keep bits";
      EXPECT_EQ(lse_kept.download(ctx), lse.download(ctx)) << "keep bits";
      EXPECT_EQ(bits16(dqkv_kept.download(ctx)), bits16(written.download(ctx))) << "keep bits";
    }
    const auto head = static_cast<std::size_t>(3 * c.hn), hn = static_cast<std::size_t>(c.hn);
    if (kernels::attention_tensor_core_supported(tensor::dtype_of<T>(), c.hn)) {
      // The ops take the tensor-core kernels here (P and dS rounded to 16 bits): their bounds
      // (tests/gpu/attention_tc_test.cpp).
      const auto bounds = attention_tc_test::attention_bounds(
          attention_tc_test::bound_inputs(c.s, c.b, c.np, c.hn, c.coeff, qkv.host, dctx.host,
                                          context.host, probs, c.p == 0.0f ? probs : dropped));
      const auto got_ctx = context.download(ctx);
      EXPECT_EQ(attention_tc_test::measure(got_ctx, context.host, bounds.ctx, 0, hn, hn).beyond,
                0u);
      for (std::size_t part = 0; part < 3; ++part) {
        EXPECT_EQ(
            attention_tc_test::measure(got, dqkv.host, bounds.dqkv, part * hn, hn, head).beyond, 0u)
            << "part " << part;
      }
      continue;
    }
    expect_one_ulp(context.download(ctx), context.host, 0, ctx_n, ctx_n, "ctx");
    expect_one_ulp(got, dqkv.host, 2 * hn, hn, head, "dv");
    const double bound = std::is_same_v<T, tensor::BFloat16> ? 0x1p-8 : 0x1p-10;
    MDS_EXPECT_CLOSE(widened(got), widened(dqkv.host), bound);
  }
}

void expect_one_line_failure(const std::function<void()>& call, const std::string& needle) {
  try {
    call();
    FAIL() << "expected a failure mentioning " << needle;
  } catch (const base::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(needle), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// The decode attention over a 16-bit cache on a device against the host's: a prefill of 257
// positions (several keys per thread), then one, then three; the cache bit for bit (the append
// copies), the context within one 16-bit ulp (fp32 math, another summation order).
TYPED_TEST(Attention16OnDevice, DecodeAttentionMatchesHost16BitDecode) {
  using T = TypeParam;
  const DeviceContext ctx(kCuda0), host;
  for (const std::int64_t hn : {std::int64_t{8}, std::int64_t{64}, std::int64_t{128}}) {
    const std::int64_t b = 2, np = 2, capacity = 270;
    const Shape cache_shape{b, np, capacity, hn};
    const auto cache_n = static_cast<std::size_t>(cache_shape.numel());
    Mirrored<T> keys(ctx, halves<T>(cache_n, 40, -2.0f, 2.0f), cache_shape);
    Mirrored<T> values(ctx, halves<T>(cache_n, 41, -2.0f, 2.0f), cache_shape);
    std::int64_t past = 0;
    for (const std::int64_t count : {std::int64_t{257}, std::int64_t{1}, std::int64_t{3}}) {
      const std::string what = "hn=" + std::to_string(hn) + " past=" + std::to_string(past);
      const Shape qkv_shape{b, count, np * 3 * hn}, ctx_shape{b, count, np * hn};
      const auto ctx_n = static_cast<std::size_t>(ctx_shape.numel());
      Mirrored<T> qkv(ctx, halves<T>(static_cast<std::size_t>(qkv_shape.numel()), 42, -2.0f, 2.0f),
                      qkv_shape);
      Mirrored<T> context(ctx, std::vector<T>(ctx_n, T{0xFFFF}), ctx_shape);
      ops::kv_cache_append(host, keys.h, values.h, qkv.h, past);
      ops::decode_attention_forward(host, context.h, qkv.h, keys.h, values.h, past, 1.0f);
      ops::kv_cache_append(ctx, keys.d, values.d, qkv.d, past);
      ops::decode_attention_forward(ctx, context.d, qkv.d, keys.d, values.d, past, 1.0f);
      EXPECT_EQ(widened(keys.download(ctx)), widened(keys.host)) << what;
      EXPECT_EQ(widened(values.download(ctx)), widened(values.host)) << what;
      expect_one_ulp(context.download(ctx), context.host, 0, ctx_n, ctx_n, "decode " + what);
      past += count;
    }
  }
}

// The dtype rule on a device: one dtype for the activations; lse stays fp32.
TEST(Attention16OnDevice, DtypeMixesFailWithOneLine) {
  const DeviceContext ctx(kCuda0);
  const Shape qkv_shape{2, 1, 24}, ctx_shape{2, 1, 8}, lse_shape{1, 1, 2};
  Mirrored<tensor::BFloat16> qkv(ctx, halves<tensor::BFloat16>(48, 1, -1.0f, 1.0f), qkv_shape);
  Mirrored<float> context32(ctx, std::vector<float>(16), ctx_shape);
  Mirrored<float> lse(ctx, std::vector<float>(2), lse_shape);
  Mirrored<tensor::BFloat16> lse16(ctx, std::vector<tensor::BFloat16>(2), lse_shape);
  expect_one_line_failure(
      [&] { ops::flash_attention_forward(ctx, context32.d, lse.d, qkv.d, 1.0f); },
      "ops::flash_attention_forward: context must have qkv's dtype bfloat16, got float32");
  Mirrored<tensor::BFloat16> context(ctx, std::vector<tensor::BFloat16>(16), ctx_shape);
  expect_one_line_failure(
      [&] { ops::flash_attention_forward(ctx, context.d, lse16.d, qkv.d, 1.0f); },
      "ops::flash_attention_forward: lse must be float32, got bfloat16");
  // Keep bits of another shape or dtype (looked at only with dropout).
  Mirrored<std::int32_t> keep(ctx, std::vector<std::int32_t>(4), Shape{1, 1, 2, 2});
  Mirrored<std::int32_t> wide(ctx, std::vector<std::int32_t>(8), Shape{1, 1, 2, 4});
  Mirrored<float> keep32(ctx, std::vector<float>(4), Shape{1, 1, 2, 2});
  const ops::DropoutStream dropout{0.1f, 1, 2};
  ops::flash_attention_forward(ctx, context.d, lse.d, qkv.d, 1.0f, {}, {}, wide.d);
  ops::flash_attention_forward(ctx, context.d, lse.d, qkv.d, 1.0f, dropout, {}, keep.d);
  expect_one_line_failure(
      [&] {
        ops::flash_attention_forward(ctx, context.d, lse.d, qkv.d, 1.0f, dropout, {}, wide.d);
      },
      "ops::flash_attention_forward: keep_bits must have shape [1, 1, 2, 2], got [1, 1, 2, 4]");
  expect_one_line_failure(
      [&] {
        ops::flash_attention_forward(ctx, context.d, lse.d, qkv.d, 1.0f, dropout, {}, keep32.d);
      },
      "ops::flash_attention_forward: keep_bits must be int32");

  const Shape cache_shape{1, 1, 4, 8}, step_shape{1, 1, 24};
  Mirrored<float> keys(ctx, std::vector<float>(32), cache_shape);
  Mirrored<tensor::BFloat16> values(ctx, std::vector<tensor::BFloat16>(32), cache_shape);
  Mirrored<tensor::BFloat16> step(ctx, halves<tensor::BFloat16>(24, 2, -1.0f, 1.0f), step_shape);
  expect_one_line_failure([&] { ops::kv_cache_append(ctx, keys.d, values.d, step.d, 0); },
                          "ops::kv_cache_append: keys must have qkv's dtype bfloat16, got float32");
}

}  // namespace
}  // namespace mds
