// ALiBi (training.md §1.4 step 5): upstream's slopes (the spec's vectors), the key bias in the
// params dtype, and the host attention with it: the canonical penalty −m·(i − j) of the ALiBi
// paper, whatever the layer-scaling coefficient.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/error.h"
#include "model/alibi.h"
#include "ops/attention.h"

namespace mds::model {
namespace {

using tensor::DType;
using tensor::Tensor;

TEST(Alibi, SlopesAreTheSpecVectors) {
  const std::vector<double> eight = alibi_slopes(8);
  ASSERT_EQ(eight.size(), 8u);
  for (int k = 0; k < 8; ++k)
    EXPECT_EQ(eight[static_cast<std::size_t>(k)], std::ldexp(1.0, -(k + 1)));
  const std::vector<double> twelve = alibi_slopes(12);
  ASSERT_EQ(twelve.size(), 12u);
  for (int k = 0; k < 8; ++k)
    EXPECT_EQ(twelve[static_cast<std::size_t>(k)], std::ldexp(1.0, -(k + 1)));
  const double tail[] = {0.70710678, 0.35355339, 0.1767767, 0.08838835};
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(twelve[static_cast<std::size_t>(8 + k)], tail[k], 1e-8);
  const std::vector<double> bloom = alibi_slopes(112);
  ASSERT_EQ(bloom.size(), 112u);
  EXPECT_NEAR(bloom[0], 0.917004, 1e-6);
  EXPECT_NEAR(bloom[1], 0.840896, 1e-6);
  EXPECT_NEAR(bloom[2], 0.771105, 1e-6);
  EXPECT_NEAR(bloom[64], 0.957603, 1e-6);
  EXPECT_NEAR(bloom[65], 0.878126, 1e-6);
  EXPECT_NEAR(bloom[66], 0.805245, 1e-6);
  EXPECT_NEAR(bloom[111], 0.0163168, 1e-7);
}

TEST(Alibi, KeyBiasIsTheFp32ProductRoundedToTheParamsDtype) {
  // Heads 2 and 3 of 4 (a TP rank's share), 1100 keys.
  const std::vector<float> fp32 = alibi_key_bias(4, 2, 2, 1100, DType::kFloat32);
  ASSERT_EQ(fp32.size(), 2200u);
  const double slopes[] = {alibi_slopes(4)[2], alibi_slopes(4)[3]};
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 1100; ++j) {
      EXPECT_EQ(fp32[static_cast<std::size_t>(h * 1100 + j)],
                static_cast<float>(slopes[h]) * static_cast<float>(j));
    }
  }
  // bf16 keeps 8 significant bits: head 0 of 2 has slope 2^-4, and 1023·2^-4 = 63.9375 becomes 64.
  const std::vector<float> bf16 = alibi_key_bias(2, 0, 1, 1100, DType::kBFloat16);
  const float slope = static_cast<float>(alibi_slopes(2)[0]);
  EXPECT_EQ(bf16[1023], 64.0f);
  EXPECT_EQ(bf16[1023], tensor::to_float(tensor::to_bfloat16(slope * 1023.0f)));
  EXPECT_NE(bf16[1023], slope * 1023.0f);  // really rounded
  EXPECT_THROW(alibi_key_bias(4, 3, 2, 8, DType::kFloat32), base::Error);
}

// The host attention with the key bias gives softmax(q·k/√hn − m·(i − j)) over j ≤ i, for
// coeff 1 and 3 (the bias is divided by coeff before the softmax multiplies it back).
TEST(Alibi, HostAttentionAppliesTheCanonicalPenalty) {
  const std::int64_t s = 9, b = 2, np = 2, hn = 4;
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(static_cast<std::size_t>(s * b * np * 3 * hn));
  for (float& v : qkv) v = normal(gen);
  const std::vector<float> bias = alibi_key_bias(4, 2, np, s, DType::kFloat32);
  const double slopes[] = {alibi_slopes(4)[2], alibi_slopes(4)[3]};
  for (const float coeff : {1.0f, 3.0f}) {
    std::vector<float> probs(static_cast<std::size_t>(b * np * s * s), -1.0f);
    ops::attention_probs_forward(Tensor(probs.data(), DType::kFloat32, {b, np, s, s}),
                                 Tensor(qkv.data(), DType::kFloat32, {s, b, np * 3 * hn}), coeff,
                                 Tensor(const_cast<float*>(bias.data()), DType::kFloat32, {np, s}));
    for (std::int64_t bb = 0; bb < b; ++bb) {
      for (std::int64_t h = 0; h < np; ++h) {
        const auto at = [&](std::int64_t token, int part, std::int64_t d) {
          return static_cast<double>(
              qkv[static_cast<std::size_t>(((token * b + bb) * np + h) * 3 * hn + part * hn + d)]);
        };
        for (std::int64_t i = 0; i < s; ++i) {
          std::vector<double> scores(static_cast<std::size_t>(i + 1));
          double max = -1e300, sum = 0.0;
          for (std::int64_t j = 0; j <= i; ++j) {
            double dot = 0.0;
            for (std::int64_t d = 0; d < hn; ++d) dot += at(i, 0, d) * at(j, 1, d);
            scores[static_cast<std::size_t>(j)] =
                dot / std::sqrt(static_cast<double>(hn)) - slopes[h] * static_cast<double>(i - j);
            max = std::max(max, scores[static_cast<std::size_t>(j)]);
          }
          for (double& v : scores) sum += std::exp(v - max);
          for (std::int64_t j = 0; j < s; ++j) {
            const double want =
                j <= i ? std::exp(scores[static_cast<std::size_t>(j)] - max) / sum : 0.0;
            EXPECT_NEAR(probs[static_cast<std::size_t>(((bb * np + h) * s + i) * s + j)], want,
                        2e-6)
                << "coeff " << coeff << " b " << bb << " head " << h << " (" << i << ", " << j
                << ")";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace mds::model
