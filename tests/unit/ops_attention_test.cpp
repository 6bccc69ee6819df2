#include <gtest/gtest.h>

#include "base/error.h"
#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_close;
using ops_test::numeric_grad;
using ops_test::random_floats;
using ops_test::view;
using ops_test::weighted_sum;

constexpr std::int64_t kS = 5, kB = 2, kNp = 2, kHn = 3;
const tensor::Shape kQkv{kS, kB, kNp * 3 * kHn};
const tensor::Shape kProbs{kB, kNp, kS, kS};
const tensor::Shape kCtx{kS, kB, kNp* kHn};

// Element t (0 q, 1 k, 2 v), head dim d of token (i, batch) and head, in upstream's layout.
float at(const std::vector<float>& qkv, int i, int batch, int head, int t, int d) {
  return qkv[((i * kB + batch) * kNp + head) * 3 * kHn + t * kHn + d];
}

TEST(OpsAttention, ForwardMatchesNaiveCausalAttention) {
  auto qkv = random_floats(kQkv.numel(), 1, -2, 2);
  std::vector<float> ctx(kCtx.numel()), probs(kProbs.numel());
  attention_forward(view(ctx, kCtx), view(probs, kProbs), view(qkv, kQkv), 1.0f);
  std::vector<double> want_ctx(ctx.size()), want_probs(probs.size());
  for (int batch = 0; batch < kB; ++batch) {
    for (int head = 0; head < kNp; ++head) {
      for (int i = 0; i < kS; ++i) {
        std::vector<double> p(kS, 0.0);
        double sum = 0;
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int d = 0; d < kHn; ++d)
            dot += at(qkv, i, batch, head, 0, d) * at(qkv, j, batch, head, 1, d);
          p[j] = std::exp(dot / std::sqrt(double{kHn}));
          sum += p[j];
        }
        for (int j = 0; j < kS; ++j) {
          p[j] /= sum;
          want_probs[((batch * kNp + head) * kS + i) * kS + j] = p[j];
        }
        for (int d = 0; d < kHn; ++d) {
          double c = 0;
          for (int j = 0; j <= i; ++j) c += p[j] * at(qkv, j, batch, head, 2, d);
          want_ctx[((i * kB + batch) * kNp + head) * kHn + d] = c;
        }
      }
    }
  }
  expect_close(probs, want_probs, 1e-6, 1e-5, "probs");
  expect_close(ctx, want_ctx, 1e-6, 1e-5, "ctx");
}

TEST(OpsAttention, QueryKeyLayerScalingGivesTheSameProbabilities) {
  EXPECT_EQ(query_key_layer_scaling_coeff(0, true), 1.0f);
  EXPECT_EQ(query_key_layer_scaling_coeff(1, true), 1.0f);
  EXPECT_EQ(query_key_layer_scaling_coeff(7, true), 7.0f);
  EXPECT_EQ(query_key_layer_scaling_coeff(7, false), 1.0f);
  auto qkv = random_floats(kQkv.numel(), 2, -2, 2);
  std::vector<float> ctx1(kCtx.numel()), p1(kProbs.numel()), ctx2(ctx1), p2(p1);
  attention_forward(view(ctx1, kCtx), view(p1, kProbs), view(qkv, kQkv), 1.0f);
  attention_forward(view(ctx2, kCtx), view(p2, kProbs), view(qkv, kQkv), 23.0f);
  expect_close(p2, p1, 1e-6, 1e-5, "probs");
  expect_close(ctx2, ctx1, 1e-6, 1e-5, "ctx");
}

TEST(OpsAttention, BackwardMatchesFiniteDifferences) {
  auto qkv = random_floats(kQkv.numel(), 3, -1.5f, 1.5f);
  auto dctx = random_floats(kCtx.numel(), 4);
  for (const float coeff : {1.0f, 3.0f}) {
    std::vector<float> ctx(kCtx.numel()), probs(kProbs.numel());
    auto loss = [&] {
      attention_forward(view(ctx, kCtx), view(probs, kProbs), view(qkv, kQkv), coeff);
      return weighted_sum(ctx, dctx);
    };
    loss();
    std::vector<float> dqkv(qkv.size()), dprobs(probs.size());
    attention_backward(view(dqkv, kQkv), view(dprobs, kProbs), view(dctx, kCtx),
                       view(probs, kProbs), view(qkv, kQkv), coeff);
    expect_close(dqkv, numeric_grad(qkv, loss, 1e-3f), 3e-3, 3e-3, "dqkv");
  }
}

TEST(OpsAttention, SplitStepsWithDropoutMatchFiniteDifferences) {
  auto qkv = random_floats(kQkv.numel(), 5, -1.5f, 1.5f);
  auto dctx = random_floats(kCtx.numel(), 6);
  const DropoutStream drop{0.3f, 99, 7};
  std::vector<float> probs(kProbs.numel()), dropped(kProbs.numel()), ctx(kCtx.numel());
  auto loss = [&] {
    attention_probs_forward(view(probs, kProbs), view(qkv, kQkv), 2.0f);
    dropout_forward(view(dropped, kProbs), view(probs, kProbs), drop);
    attention_context_forward(view(ctx, kCtx), view(dropped, kProbs), view(qkv, kQkv));
    return weighted_sum(ctx, dctx);
  };
  loss();
  std::vector<float> dqkv(qkv.size()), dprobs(probs.size());
  attention_context_backward(view(dprobs, kProbs), view(dqkv, kQkv), view(dctx, kCtx),
                             view(dropped, kProbs), view(qkv, kQkv));
  dropout_backward(view(dprobs, kProbs), view(dprobs, kProbs), drop);
  attention_probs_backward(view(dqkv, kQkv), view(dprobs, kProbs), view(probs, kProbs),
                           view(qkv, kQkv), 2.0f);
  expect_close(dqkv, numeric_grad(qkv, loss, 1e-3f), 3e-3, 3e-3, "dqkv");
}

// The attention dropout as its own step over a flat tensor: x ⊙ mask / (1 − p) with the masks of
// attention_dropout_keep.
void attention_dropout(std::vector<float>& out, const std::vector<float>& x,
                       const DropoutStream& stream) {
  const auto scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(stream.p)));
  for (std::size_t e = 0; e < x.size(); ++e) {
    out[e] = x[e] * (attention_dropout_keep(stream, e) ? scale : 0.0f);
  }
}

TEST(OpsAttention, FusedDropoutEqualsTheComposedStepsBitForBit) {
  // s = 5 puts Philox blocks across rows; s = 300 splits rows into several mask chunks.
  for (const std::int64_t s : {std::int64_t{5}, std::int64_t{300}}) {
    const tensor::Shape qkv_shape{s, kB, kNp * 3 * kHn}, probs_shape{kB, kNp, s, s},
        ctx_shape{s, kB, kNp * kHn};
    const DropoutStream stream{0.3f, 1234, 77};
    auto qkv = random_floats(qkv_shape.numel(), 11, -2, 2);
    const auto dctx = random_floats(ctx_shape.numel(), 12);
    std::vector<float> probs(probs_shape.numel());
    attention_probs_forward(view(probs, probs_shape), view(qkv, qkv_shape), 1.0f);

    std::vector<float> dropped(probs.size()), ctx(ctx_shape.numel());
    attention_dropout(dropped, probs, stream);
    attention_context_forward(view(ctx, ctx_shape), view(dropped, probs_shape),
                              view(qkv, qkv_shape));
    std::vector<float> fused_dropped(probs.size(), 7.0f), fused_ctx(ctx.size(), 7.0f);
    attention_context_forward_with_dropout(view(fused_ctx, ctx_shape),
                                           view(fused_dropped, probs_shape),
                                           view(probs, probs_shape), view(qkv, qkv_shape), stream);
    expect_close(fused_dropped, dropped, 0, 0, "dropped");
    expect_close(fused_ctx, ctx, 0, 0, "ctx");

    auto dctx_copy = dctx;
    std::vector<float> dprobs(probs.size()), dqkv(qkv.size(), 0.5f);
    attention_context_backward(view(dprobs, probs_shape), view(dqkv, qkv_shape),
                               view(dctx_copy, ctx_shape), view(dropped, probs_shape),
                               view(qkv, qkv_shape));
    attention_dropout(dprobs, dprobs, stream);
    std::vector<float> fused_dprobs(probs.size(), 7.0f), fused_dqkv(qkv.size(), 0.5f);
    std::fill(fused_dropped.begin(), fused_dropped.end(), 7.0f);
    attention_context_backward_with_dropout(
        view(fused_dprobs, probs_shape), view(fused_dqkv, qkv_shape),
        view(fused_dropped, probs_shape), view(dctx_copy, ctx_shape), view(probs, probs_shape),
        view(qkv, qkv_shape), stream);
    expect_close(fused_dqkv, dqkv, 0, 0, "dqkv");
    // Above the diagonal the fused dprobs is zero; the softmax backward never reads it there.
    for (std::int64_t r = 0; r < kB * kNp * s; ++r) {
      const std::int64_t i = r % s;
      for (std::int64_t j = 0; j < s; ++j) {
        const float want = j <= i ? dprobs[r * s + j] : 0.0f;
        ASSERT_EQ(fused_dprobs[r * s + j], want) << "s=" << s << " row " << r << " col " << j;
      }
    }
  }
}

TEST(OpsAttention, RejectsInconsistentShapes) {
  std::vector<float> qkv(kQkv.numel()), probs(kProbs.numel());
  EXPECT_THROW(attention_probs_forward(view(probs, {kB, kNp, kS, kS}),
                                       view(qkv, {kS, kB * kNp * 3 * kHn / 2, 2}), 1.0f),
               base::Error);
  EXPECT_THROW(attention_probs_forward(view(probs, kProbs), view(qkv, kQkv), 0.5f), base::Error);
}

}  // namespace
// A TP rank holding heads [first, first + np) of n draws the attention dropout masks of those
// heads in the unsplit tensor: its dropped probabilities are slices of the unsplit ones.
TEST(OpsAttention, HeadRangeDrawsTheUnsplitMasks) {
  constexpr std::int64_t s = 7, b = 2, n = 4, hn = 3, np = 2, first = 2;
  const tensor::Shape full_qkv{s, b, n * 3 * hn}, full_probs{b, n, s, s}, full_ctx{s, b, n * hn};
  const tensor::Shape part_qkv{s, b, np * 3 * hn}, part_probs{b, np, s, s}, part_ctx{s, b, np * hn};
  const DropoutStream stream{0.4f, 4321, 5};
  auto qkv = random_floats(full_qkv.numel(), 21, -2, 2);
  std::vector<float> probs(full_probs.numel()), dropped(probs.size()), ctx(full_ctx.numel());
  attention_probs_forward(view(probs, full_probs), view(qkv, full_qkv), 1.0f);
  attention_context_forward_with_dropout(view(ctx, full_ctx), view(dropped, full_probs),
                                         view(probs, full_probs), view(qkv, full_qkv), stream);
  // The rank's qkv features are the whole-head block [first·3·hn, (first + np)·3·hn) per token.
  std::vector<float> part(part_qkv.numel());
  for (std::int64_t t = 0; t < s * b; ++t) {
    for (std::int64_t f = 0; f < np * 3 * hn; ++f) {
      part[static_cast<std::size_t>(t * np * 3 * hn + f)] =
          qkv[static_cast<std::size_t>(t * n * 3 * hn + first * 3 * hn + f)];
    }
  }
  std::vector<float> part_p(part_probs.numel()), part_dropped(part_p.size()),
      part_c(part_ctx.numel());
  attention_probs_forward(view(part_p, part_probs), view(part, part_qkv), 1.0f);
  attention_context_forward_with_dropout(view(part_c, part_ctx), view(part_dropped, part_probs),
                                         view(part_p, part_probs), view(part, part_qkv), stream,
                                         {first, n});
  for (std::int64_t batch = 0; batch < b; ++batch) {
    for (std::int64_t h = 0; h < np; ++h) {
      for (std::int64_t e = 0; e < s * s; ++e) {
        const float whole =
            dropped[static_cast<std::size_t>(((batch * n) + first + h) * s * s + e)];
        const float split = part_dropped[static_cast<std::size_t>(((batch * np) + h) * s * s + e)];
        ASSERT_EQ(whole, split) << "batch " << batch << " head " << h << " element " << e;
      }
    }
  }
  std::vector<float> unused(part_p.size()), unused_ctx(part_c.size());
  EXPECT_THROW(attention_context_forward_with_dropout(
                   view(unused_ctx, part_ctx), view(unused, part_probs), view(part_p, part_probs),
                   view(part, part_qkv), stream, {3, n}),
               base::Error);
}

}  // namespace mds::ops
