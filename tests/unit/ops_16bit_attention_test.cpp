// The 16-bit attention on the host: the probabilities path (with and without attention dropout)
// and the decode attention over a 16-bit key/value cache, on bf16/fp16 activations, must equal
// the fp32 ops on the widened inputs followed by one rounding of each output, bit for bit; the
// fp32 probabilities must be the fp32 op's; dtype mixes fail with one line.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "ops/attention.h"
#include "ops_16bit_util.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_rounded;
using ops_test::Half;
using ops_test::view;
using tensor::Shape;

struct Dims {
  std::int64_t s, b, np, hn;
};
// One token, and a sequence one past a 32-row tile; head dims 8 and 64.
const std::vector<Dims> kDims = {{1, 1, 1, 8}, {33, 2, 2, 8}, {1, 2, 1, 64}, {33, 1, 2, 64}};

std::string name_of(const Dims& d, float p) {
  return "s=" + std::to_string(d.s) + " b=" + std::to_string(d.b) + " np=" + std::to_string(d.np) +
         " hn=" + std::to_string(d.hn) + " p=" + std::to_string(p);
}

template <typename T>
class Attention16Bit : public ::testing::Test {};
using HalfTypes = ::testing::Types<tensor::BFloat16, tensor::Float16>;
TYPED_TEST_SUITE(Attention16Bit, HalfTypes);

// Forward then backward of the probabilities path, the 16-bit call and the fp32 call on the
// widened tensors side by side (`dropout.p` 0: the plain halves, else the fused dropout ones).
template <typename T>
void check_training_attention(const Dims& d, const DropoutStream& dropout) {
  const std::string what = name_of(d, dropout.p);
  const Shape qkv_shape{d.s, d.b, d.np * 3 * d.hn}, ctx_shape{d.s, d.b, d.np * d.hn};
  const Shape probs_shape{d.b, d.np, d.s, d.s};
  const auto qkv_n = static_cast<std::size_t>(qkv_shape.numel());
  const auto ctx_n = static_cast<std::size_t>(ctx_shape.numel());
  const auto probs_n = static_cast<std::size_t>(probs_shape.numel());
  Half<T> qkv(qkv_n, 1), ctx(ctx_n, 2), dctx(ctx_n, 3), dqkv(qkv_n, 4);
  std::vector<float> probs(probs_n), probs16(probs_n), dropped(probs_n), dropped16(probs_n);
  std::vector<float> dprobs(probs_n), dprobs16(probs_n);
  const float coeff = 2.0f;

  attention_probs_forward(view(probs, probs_shape), qkv.f(qkv_shape), coeff);
  attention_probs_forward(view(probs16, probs_shape), qkv.t(qkv_shape), coeff);
  EXPECT_EQ(probs16, probs) << what;
  if (dropout.p == 0.0f) {
    attention_context_forward(ctx.f(ctx_shape), view(probs, probs_shape), qkv.f(qkv_shape));
    attention_context_forward(ctx.t(ctx_shape), view(probs16, probs_shape), qkv.t(qkv_shape));
  } else {
    attention_context_forward_with_dropout(ctx.f(ctx_shape), view(dropped, probs_shape),
                                           view(probs, probs_shape), qkv.f(qkv_shape), dropout);
    attention_context_forward_with_dropout(ctx.t(ctx_shape), view(dropped16, probs_shape),
                                           view(probs16, probs_shape), qkv.t(qkv_shape), dropout);
    EXPECT_EQ(dropped16, dropped) << what;
  }
  expect_rounded(ctx.low, ctx.wide, "ctx " + what);

  if (dropout.p == 0.0f) {
    attention_context_backward(view(dprobs, probs_shape), dqkv.f(qkv_shape), dctx.f(ctx_shape),
                               view(probs, probs_shape), qkv.f(qkv_shape));
    attention_context_backward(view(dprobs16, probs_shape), dqkv.t(qkv_shape), dctx.t(ctx_shape),
                               view(probs16, probs_shape), qkv.t(qkv_shape));
  } else {
    attention_context_backward_with_dropout(view(dprobs, probs_shape), dqkv.f(qkv_shape),
                                            view(dropped, probs_shape), dctx.f(ctx_shape),
                                            view(probs, probs_shape), qkv.f(qkv_shape), dropout);
    attention_context_backward_with_dropout(view(dprobs16, probs_shape), dqkv.t(qkv_shape),
                                            view(dropped16, probs_shape), dctx.t(ctx_shape),
                                            view(probs16, probs_shape), qkv.t(qkv_shape), dropout);
  }
  attention_probs_backward(dqkv.f(qkv_shape), view(dprobs, probs_shape), view(probs, probs_shape),
                           qkv.f(qkv_shape), coeff);
  attention_probs_backward(dqkv.t(qkv_shape), view(dprobs16, probs_shape),
                           view(probs16, probs_shape), qkv.t(qkv_shape), coeff);
  // dqkv += …: the 16-bit start widened, every gradient added in fp32, rounded once (the v part
  // after the context backward; the probs backward's round trip of it is exact).
  expect_rounded(dqkv.low, dqkv.wide, "dqkv " + what);
}

TYPED_TEST(Attention16Bit, ProbabilitiesPathRoundsTheFp32ResultsOnce) {
  for (const Dims& d : kDims) check_training_attention<TypeParam>(d, {});
}

TYPED_TEST(Attention16Bit, WithDropoutRoundsTheFp32ResultsOnce) {
  for (const Dims& d : kDims) check_training_attention<TypeParam>(d, {0.3f, 0x5EEDull, 11});
}

// The cache filled in two appends (33 positions, then one more), each followed by the decode
// attention of the new positions; the 16-bit cache holds the 16-bit k and v bit for bit.
TYPED_TEST(Attention16Bit, DecodeAttentionOverA16BitCache) {
  using T = TypeParam;
  const DeviceContext host;
  for (const std::int64_t hn : {std::int64_t{8}, std::int64_t{64}}) {
    const std::int64_t b = 2, np = 2, capacity = 40, w = np * 3 * hn;
    const Shape cache_shape{b, np, capacity, hn};
    const auto cache_n = static_cast<std::size_t>(cache_shape.numel());
    Half<T> keys(cache_n, 5), values(cache_n, 6);
    std::int64_t past = 0;
    for (const std::int64_t count : {std::int64_t{33}, std::int64_t{1}}) {
      const std::string what = "hn=" + std::to_string(hn) + " past=" + std::to_string(past);
      const auto n = static_cast<std::size_t>(b * count * w);
      Half<T> qkv(n, 7 + static_cast<std::uint32_t>(past));
      Half<T> ctx(static_cast<std::size_t>(b * count * np * hn), 8);
      const Shape qkv_shape{b, count, w}, ctx_shape{b, count, np * hn};
      kv_cache_append(host, keys.f(cache_shape), values.f(cache_shape), qkv.f(qkv_shape), past);
      kv_cache_append(host, keys.t(cache_shape), values.t(cache_shape), qkv.t(qkv_shape), past);
      expect_rounded(keys.low, keys.wide, "keys " + what);
      expect_rounded(values.low, values.wide, "values " + what);
      decode_attention_forward(host, ctx.f(ctx_shape), qkv.f(qkv_shape), keys.f(cache_shape),
                               values.f(cache_shape), past, 1.0f);
      decode_attention_forward(host, ctx.t(ctx_shape), qkv.t(qkv_shape), keys.t(cache_shape),
                               values.t(cache_shape), past, 1.0f);
      expect_rounded(ctx.low, ctx.wide, "decode ctx " + what);
      past += count;
    }
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

TEST(Attention16Bit, DtypeMixesFailWithOneLine) {
  const Dims d{2, 1, 1, 8};
  const Shape qkv_shape{d.s, d.b, 3 * d.hn}, ctx_shape{d.s, d.b, d.hn}, probs_shape{1, 1, 2, 2};
  Half<tensor::BFloat16> qkv(48, 1), ctx(16, 2), probs_low(4, 3);
  Half<tensor::Float16> dqkv(48, 4);
  std::vector<float> ctx32(16), ctx8(8), probs(4);
  expect_one_line_failure(
      [&] { attention_probs_forward(probs_low.t(probs_shape), qkv.t(qkv_shape), 1.0f); },
      "ops::attention_probs_forward: probs must be float32, got bfloat16");
  expect_one_line_failure(
      [&] {
        attention_context_forward(view(ctx32, ctx_shape), view(probs, probs_shape),
                                  qkv.t(qkv_shape));
      },
      "ops::attention_context_forward: ctx must have qkv's dtype bfloat16, got float32");
  expect_one_line_failure(
      [&] {
        attention_probs_backward(dqkv.t(qkv_shape), view(probs, probs_shape),
                                 view(probs, probs_shape), qkv.t(qkv_shape), 1.0f);
      },
      "ops::attention_probs_backward: dqkv must have qkv's dtype bfloat16, got float16");
  expect_one_line_failure(
      [&] {
        attention_context_backward(view(probs, probs_shape), qkv.t(qkv_shape),
                                   view(ctx32, ctx_shape), view(probs, probs_shape),
                                   qkv.t(qkv_shape));
      },
      "ops::attention_context_backward: dctx must have qkv's dtype bfloat16, got float32");

  const Shape cache_shape{1, 1, 4, 8}, step_shape{1, 1, 24};
  std::vector<float> keys32(32);
  Half<tensor::BFloat16> keys(32, 5), values(32, 6), step(24, 7);
  const DeviceContext host;
  expect_one_line_failure(
      [&] {
        kv_cache_append(host, view(keys32, cache_shape), values.t(cache_shape), step.t(step_shape),
                        0);
      },
      "ops::kv_cache_append: keys must have qkv's dtype bfloat16, got float32");
  expect_one_line_failure(
      [&] {
        decode_attention_forward(host, view(ctx8, {1, 1, 8}), step.t(step_shape),
                                 keys.t(cache_shape), values.t(cache_shape), 0, 1.0f);
      },
      "ops::decode_attention_forward: context must have qkv's dtype bfloat16, got float32");
}

}  // namespace
}  // namespace mds::ops
