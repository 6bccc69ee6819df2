#include <gtest/gtest.h>

#include "base/error.h"
#include "ops/cross_entropy.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_close;
using ops_test::numeric_grad;
using ops_test::random_floats;
using ops_test::view;

constexpr std::int64_t kN = 6, kV = 11;

TEST(OpsCrossEntropy, ForwardMatchesLogSoftmax) {
  auto logits = random_floats(kN * kV, 1, -5, 5);
  std::vector<std::int64_t> targets{0, 3, 10, 5, 5, 7};
  std::vector<float> loss(kN), max(kN), sum(kN);
  auto exps = logits;
  cross_entropy_forward(view(loss, {2, 3}), view(max, {kN}), view(sum, {kN}),
                        view(exps, {2, 3, kV}), view(targets, {2, 3}));
  for (int n = 0; n < kN; ++n) {
    double z = 0;
    for (int j = 0; j < kV; ++j) z += std::exp(static_cast<double>(logits[n * kV + j]));
    EXPECT_NEAR(loss[n], std::log(z) - logits[n * kV + targets[n]], 1e-5) << n;
  }
}

TEST(OpsCrossEntropy, VocabShardsReproduceTheFullLoss) {
  // Two shards reduced by hand as the TP all-reduces would: MAX, SUM, SUM.
  auto logits = random_floats(kN * kV, 2, -5, 5);
  std::vector<std::int64_t> targets{0, 3, 10, 5, 6, 7};
  std::vector<float> loss(kN), max(kN), sum(kN);
  auto exps = logits;
  cross_entropy_forward(view(loss, {kN}), view(max, {kN}), view(sum, {kN}), view(exps, {kN, kV}),
                        view(targets, {kN}));
  constexpr std::int64_t kSplit = 6;
  std::vector<float> shard[2];
  for (int n = 0; n < kN; ++n) {
    shard[0].insert(shard[0].end(), logits.begin() + n * kV, logits.begin() + n * kV + kSplit);
    shard[1].insert(shard[1].end(), logits.begin() + n * kV + kSplit,
                    logits.begin() + (n + 1) * kV);
  }
  const std::int64_t width[2] = {kSplit, kV - kSplit}, start[2] = {0, kSplit};
  std::vector<float> m[2], t[2], s[2];
  std::vector<float> gmax(kN), gt(kN, 0.0f), gs(kN, 0.0f);
  for (int r = 0; r < 2; ++r) {
    m[r].resize(kN);
    cross_entropy_row_max(view(m[r], {kN}), view(shard[r], {kN, width[r]}));
  }
  for (int n = 0; n < kN; ++n) gmax[n] = std::max(m[0][n], m[1][n]);
  for (int r = 0; r < 2; ++r) {
    t[r].resize(kN);
    s[r].resize(kN);
    cross_entropy_target_logit(view(t[r], {kN}), view(shard[r], {kN, width[r]}),
                               view(targets, {kN}), view(gmax, {kN}), start[r]);
    cross_entropy_exp_sum(view(s[r], {kN}), view(shard[r], {kN, width[r]}), view(gmax, {kN}));
    for (int n = 0; n < kN; ++n) {
      gt[n] += t[r][n];
      gs[n] += s[r][n];
    }
  }
  std::vector<float> sharded_loss(kN);
  cross_entropy_loss(view(sharded_loss, {kN}), view(gs, {kN}), view(gt, {kN}));
  expect_close(sharded_loss, loss, 1e-5, 1e-5, "loss");
  // The sharded backward is the matching slice of the full one.
  auto dloss = random_floats(kN, 3);
  std::vector<float> full(kN * kV), part(kN * width[1]);
  cross_entropy_backward(view(full, {kN, kV}), view(exps, {kN, kV}), view(targets, {kN}),
                         view(max, {kN}), view(sum, {kN}), view(dloss, {kN}));
  cross_entropy_backward(view(part, {kN, width[1]}), view(shard[1], {kN, width[1]}),
                         view(targets, {kN}), view(gmax, {kN}), view(gs, {kN}), view(dloss, {kN}),
                         start[1]);
  for (int n = 0; n < kN; ++n) {
    for (int j = 0; j < width[1]; ++j) {
      EXPECT_NEAR(part[n * width[1] + j], full[n * kV + kSplit + j], 1e-6);
    }
  }
}

TEST(OpsCrossEntropy, BackwardMatchesFiniteDifferencesAndMayRunInPlace) {
  auto logits = random_floats(kN * kV, 4, -3, 3);
  std::vector<std::int64_t> targets{1, 2, 3, 4, 5, 10};
  auto dloss = random_floats(kN, 5);
  std::vector<float> loss(kN), max(kN), sum(kN), exps;
  // The forward overwrites its input with exp(logits − max): run it on a copy.
  auto objective = [&] {
    exps = logits;
    cross_entropy_forward(view(loss, {kN}), view(max, {kN}), view(sum, {kN}), view(exps, {kN, kV}),
                          view(targets, {kN}));
    return ops_test::weighted_sum(loss, dloss);
  };
  const auto numeric = numeric_grad(logits, objective, 1e-3f);
  objective();
  for (int n = 0; n < kN; ++n) {
    for (int j = 0; j < kV; ++j) {
      EXPECT_NEAR(exps[n * kV + j], std::exp(logits[n * kV + j] - max[n]), 1e-6) << n << "," << j;
    }
  }
  std::vector<float> dlogits(logits.size(), 5.0f);
  cross_entropy_backward(view(dlogits, {kN, kV}), view(exps, {kN, kV}), view(targets, {kN}),
                         view(max, {kN}), view(sum, {kN}), view(dloss, {kN}));
  expect_close(dlogits, numeric, 2e-3, 2e-3, "dlogits");
  auto in_place = exps;
  cross_entropy_backward(view(in_place, {kN, kV}), view(in_place, {kN, kV}), view(targets, {kN}),
                         view(max, {kN}), view(sum, {kN}), view(dloss, {kN}));
  expect_close(in_place, dlogits, 0, 0, "in place");
}

TEST(OpsCrossEntropy, MaskedMeanAndItsGradient) {
  std::vector<float> loss{1, 2, 3, 4}, mask{1, 0, 1, 1}, dloss(4);
  EXPECT_FLOAT_EQ(masked_mean_loss(view(loss, {4}), view(mask, {4})), 8.0f / 3.0f);
  masked_mean_loss_backward(view(dloss, {4}), view(mask, {4}), 3.0f);
  EXPECT_FLOAT_EQ(dloss[0], 1.0f);
  EXPECT_FLOAT_EQ(dloss[1], 0.0f);
  EXPECT_FLOAT_EQ(dloss[3], 1.0f);
}

// The backward given Σ mask (the model sums the host mask it staged) is the one that sums it.
TEST(OpsCrossEntropy, MaskedMeanGradientFromAGivenMaskSum) {
  std::vector<float> mask(1000), summed(1000, 7.0f), given(1000, 9.0f);
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 == 0 ? 0.0f : 0.1f * (i % 7);
  const double sum = loss_mask_sum(view(mask, {1000}));
  double expected = 0.0;
  for (const float m : mask) expected += m;
  EXPECT_EQ(sum, expected);
  masked_mean_loss_backward(view(summed, {1000}), view(mask, {1000}), 0.75f);
  masked_mean_loss_backward({}, view(given, {1000}), view(mask, {1000}), 0.75f, sum);
  EXPECT_EQ(given, summed);
  masked_mean_loss_backward({}, view(given, {1000}), view(mask, {1000}), 0.75f, 2 * sum);
  EXPECT_FLOAT_EQ(given[1], 0.5f * summed[1]);
}

TEST(OpsCrossEntropy, RejectsOutOfRangeTargets) {
  std::vector<float> logits(kN * kV), loss(kN), max(kN), sum(kN);
  std::vector<std::int64_t> targets{0, 1, 2, 3, 4, kV};
  EXPECT_THROW(cross_entropy_forward(view(loss, {kN}), view(max, {kN}), view(sum, {kN}),
                                     view(logits, {kN, kV}), view(targets, {kN})),
               base::Error);
  targets[5] = -1;
  EXPECT_THROW(cross_entropy_forward(view(loss, {kN}), view(max, {kN}), view(sum, {kN}),
                                     view(logits, {kN, kV}), view(targets, {kN})),
               base::Error);
}

}  // namespace
}  // namespace mds::ops
