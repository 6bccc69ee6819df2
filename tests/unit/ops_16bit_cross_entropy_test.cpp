// The cross entropy on bf16/fp16 logits on the host: since the fp32 logits of the old 16-bit path
// were exactly the widened 16-bit logits, every per-token value (max, target logit, sum_exp,
// loss) must be bit for bit the fp32 op's on the widened logits, and the 16-bit gradient the fp32
// gradient rounded once (what casting it back to 16 bits gave). The fused forward and backward,
// and the four vocab-parallel steps on shards that miss some targets; the 16-bit logits are left
// as they are; dtype mixes fail with one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "ops/cross_entropy.h"
#include "ops_16bit_util.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_rounded;
using ops_test::Half;
using ops_test::random_floats;
using ops_test::view;

template <typename T>
std::vector<std::uint32_t> bits_of(const std::vector<T>& values) {
  std::vector<std::uint32_t> out;
  for (const T& x : values) {
    std::uint32_t b = 0;
    std::memcpy(&b, &x, sizeof(T));
    out.push_back(b);
  }
  return out;
}

std::vector<std::int64_t> random_targets(std::int64_t n, std::int64_t v, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, v - 1);
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = dist(rng);
  return t;
}

struct Size {
  std::int64_t n, v;
};
// Rows shorter than the 16 lanes of the CPU's loops and longer, up to GPT-2's vocabulary.
const std::vector<Size> kSizes = {{1, 1}, {3, 7}, {5, 17}, {4, 257}, {6, 1000}, {2, 50257}};

template <typename T>
class CrossEntropy16Bit : public ::testing::Test {};
using HalfTypes = ::testing::Types<tensor::BFloat16, tensor::Float16>;
TYPED_TEST_SUITE(CrossEntropy16Bit, HalfTypes);

TYPED_TEST(CrossEntropy16Bit, FusedForwardAndBackwardAreTheWidenedFp32Op) {
  using T = TypeParam;
  for (const auto [n, v] : kSizes) {
    const std::string what = std::to_string(n) + "x" + std::to_string(v);
    const auto un = static_cast<std::size_t>(n), size = static_cast<std::size_t>(n * v);
    Half<T> logits(size, 1, -12.0f, 12.0f);
    auto targets = random_targets(n, v, 2);
    auto dloss = random_floats(un, 3);
    // The old path: fp32 logits (the 16-bit ones widened), the fp32 op, its gradient.
    std::vector<float> loss(un), max(un), sum(un), grad(size);
    cross_entropy_forward(view(loss, {n}), view(max, {n}), view(sum, {n}), logits.f({n, v}),
                          view(targets, {n}));
    cross_entropy_backward(view(grad, {n, v}), logits.f({n, v}), view(targets, {n}), view(max, {n}),
                           view(sum, {n}), view(dloss, {n}));

    const std::vector<T> before = logits.low;
    std::vector<float> loss16(un), max16(un), sum16(un);
    cross_entropy_forward(view(loss16, {n}), view(max16, {n}), view(sum16, {n}), logits.t({n, v}),
                          view(targets, {n}));
    EXPECT_EQ(bits_of(max16), bits_of(max)) << what;
    EXPECT_EQ(bits_of(sum16), bits_of(sum)) << what;
    EXPECT_EQ(bits_of(loss16), bits_of(loss)) << what;
    EXPECT_EQ(bits_of(logits.low), bits_of(before)) << what << ": the forward left the logits";

    std::vector<T> dlogits(size, tensor::round_to<T>(5.0f));
    cross_entropy_backward(view(dlogits, {n, v}), logits.t({n, v}), view(targets, {n}),
                           view(max16, {n}), view(sum16, {n}), view(dloss, {n}));
    expect_rounded(dlogits, grad, what + " backward");
    // In place, as the head runs it.
    cross_entropy_backward(logits.t({n, v}), logits.t({n, v}), view(targets, {n}), view(max16, {n}),
                           view(sum16, {n}), view(dloss, {n}));
    expect_rounded(logits.low, grad, what + " backward in place");
  }
}

// cross_entropy_forward_backward (the training step's head at TP = 1) is the forward then the
// backward bit for bit, its gradient written apart or over the logits; on fp32 logits too.
template <typename T>
void expect_forward_backward_is_the_two_ops(std::vector<T> logits, std::int64_t n, std::int64_t v,
                                            const std::string& what) {
  const auto un = static_cast<std::size_t>(n), size = static_cast<std::size_t>(n * v);
  auto targets = random_targets(n, v, 6);
  auto dloss = random_floats(un, 7);
  std::vector<T> two = logits;
  std::vector<float> loss(un), max(un), sum(un);
  cross_entropy_forward(view(loss, {n}), view(max, {n}), view(sum, {n}), view(two, {n, v}),
                        view(targets, {n}));
  cross_entropy_backward(view(two, {n, v}), view(two, {n, v}), view(targets, {n}), view(max, {n}),
                         view(sum, {n}), view(dloss, {n}));
  for (const bool in_place : {true, false}) {
    std::vector<T> fused = logits, apart(size);
    std::vector<float> fused_loss(un, -1.0f);
    cross_entropy_forward_backward(view(fused_loss, {n}), view(in_place ? fused : apart, {n, v}),
                                   view(fused, {n, v}), view(targets, {n}), view(dloss, {n}));
    EXPECT_EQ(bits_of(fused_loss), bits_of(loss)) << what;
    EXPECT_EQ(bits_of(in_place ? fused : apart), bits_of(two))
        << what << (in_place ? " in place" : " apart");
  }
}

TYPED_TEST(CrossEntropy16Bit, ForwardBackwardInOneCallIsTheTwoOps) {
  for (const auto [n, v] : kSizes) {
    Half<TypeParam> logits(static_cast<std::size_t>(n * v), 8, -12.0f, 12.0f);
    expect_forward_backward_is_the_two_ops(logits.low, n, v,
                                           std::to_string(n) + "x" + std::to_string(v));
  }
}

TEST(CrossEntropyFp32, ForwardBackwardInOneCallIsTheTwoOps) {
  for (const auto [n, v] : kSizes) {
    expect_forward_backward_is_the_two_ops(
        random_floats(static_cast<std::size_t>(n * v), 9, -12.0f, 12.0f), n, v,
        "fp32 " + std::to_string(n) + "x" + std::to_string(v));
  }
  std::vector<float> logits(12), loss(3), dloss(3, 1.0f);
  std::vector<std::int64_t> targets{0, 4, 1};  // 4 is past the vocabulary of 4
  try {
    cross_entropy_forward_backward(view(loss, {3}), view(logits, {3, 4}), view(logits, {3, 4}),
                                   view(targets, {3}), view(dloss, {3}));
    ADD_FAILURE() << "a target past the vocabulary was taken";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("target id 4 at token 1"), std::string::npos) << e.what();
  }
}

// Two vocab shards reduced by hand as the TP all-reduces would (MAX, SUM, SUM), each shard
// missing the targets the other one holds.
TYPED_TEST(CrossEntropy16Bit, VocabParallelStepsAreTheWidenedFp32Steps) {
  using T = TypeParam;
  constexpr std::int64_t kN = 37, kWidth = 300, kShards = 2;
  const auto un = static_cast<std::size_t>(kN), shard_size = static_cast<std::size_t>(kN * kWidth);
  auto targets = random_targets(kN, kShards * kWidth, 4);
  auto dloss = random_floats(un, 5);
  std::vector<Half<T>> shards;
  for (std::int64_t r = 0; r < kShards; ++r) {
    shards.emplace_back(shard_size, 10 + static_cast<std::uint32_t>(r), -10.0f, 10.0f);
  }
  const auto expect_bits = [](const std::vector<float>& got, const std::vector<float>& want,
                              const std::string& what) {
    EXPECT_EQ(bits_of(got), bits_of(want)) << what;
  };

  std::vector<float> max(un, -INFINITY), max16(un, -INFINITY);
  for (std::int64_t r = 0; r < kShards; ++r) {
    std::vector<float> m(un), m16(un);
    cross_entropy_row_max(view(m, {kN}), shards[r].f({kN, kWidth}));
    cross_entropy_row_max(view(m16, {kN}), shards[r].t({kN, kWidth}));
    expect_bits(m16, m, "row max, shard " + std::to_string(r));
    for (std::size_t i = 0; i < un; ++i) {
      max[i] = std::max(max[i], m[i]);
      max16[i] = std::max(max16[i], m16[i]);
    }
  }
  std::vector<float> target_logit(un, 0.0f), target_logit16(un, 0.0f), sum(un, 0.0f),
      sum16(un, 0.0f);
  for (std::int64_t r = 0; r < kShards; ++r) {
    const std::string shard = ", shard " + std::to_string(r);
    const std::vector<T> before = shards[r].low;
    std::vector<float> t(un), t16(un), s(un), s16(un);
    cross_entropy_target_logit(view(t, {kN}), shards[r].f({kN, kWidth}), view(targets, {kN}),
                               view(max, {kN}), r * kWidth);
    cross_entropy_target_logit(view(t16, {kN}), shards[r].t({kN, kWidth}), view(targets, {kN}),
                               view(max16, {kN}), r * kWidth);
    expect_bits(t16, t, "target logit" + shard);
    EXPECT_GT(std::count(t16.begin(), t16.end(), 0.0f), 0) << "no target missed" << shard;
    cross_entropy_exp_sum(view(s, {kN}), shards[r].f({kN, kWidth}), view(max, {kN}));
    cross_entropy_exp_sum(view(s16, {kN}), shards[r].t({kN, kWidth}), view(max16, {kN}));
    expect_bits(s16, s, "sum_exp" + shard);
    EXPECT_EQ(bits_of(shards[r].low), bits_of(before)) << "exp_sum left the logits" << shard;
    for (std::size_t i = 0; i < un; ++i) {
      target_logit[i] += t[i];
      target_logit16[i] += t16[i];
      sum[i] += s[i];
      sum16[i] += s16[i];
    }
  }
  std::vector<float> loss(un), loss16(un);
  cross_entropy_loss(view(loss, {kN}), view(sum, {kN}), view(target_logit, {kN}));
  cross_entropy_loss(view(loss16, {kN}), view(sum16, {kN}), view(target_logit16, {kN}));
  expect_bits(loss16, loss, "loss");

  for (std::int64_t r = 0; r < kShards; ++r) {
    // The fp32 shard now holds its exps (step 3), the 16-bit one its logits.
    std::vector<float> grad(shard_size);
    cross_entropy_backward(view(grad, {kN, kWidth}), shards[r].f({kN, kWidth}), view(targets, {kN}),
                           view(max, {kN}), view(sum, {kN}), view(dloss, {kN}), r * kWidth);
    cross_entropy_backward(shards[r].t({kN, kWidth}), shards[r].t({kN, kWidth}),
                           view(targets, {kN}), view(max16, {kN}), view(sum16, {kN}),
                           view(dloss, {kN}), r * kWidth);
    expect_rounded(shards[r].low, grad, "backward, shard " + std::to_string(r));
  }
}

std::string message_of(const auto& call) {
  try {
    call();
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

TEST(CrossEntropy16BitDtypes, MixesFailInOneLine) {
  constexpr std::int64_t kN = 2, kV = 3;
  std::vector<tensor::BFloat16> logits(kN * kV), dlogits16(kN * kV), max16(kN);
  std::vector<float> dlogits(kN * kV), max(kN), sum(kN), loss(kN), dloss(kN, 1.0f);
  std::vector<std::int64_t> targets{0, 2}, int_logits(kN * kV);
  EXPECT_EQ(message_of([&] {
              cross_entropy_backward(view(dlogits, {kN, kV}), view(logits, {kN, kV}),
                                     view(targets, {kN}), view(max, {kN}), view(sum, {kN}),
                                     view(dloss, {kN}));
            }),
            "ops::cross_entropy_backward: dlogits must have logits's dtype bfloat16, got float32");
  EXPECT_EQ(message_of([&] {
              cross_entropy_row_max(view(max16, {kN}), view(logits, {kN, kV}));
            }),
            "ops::cross_entropy_row_max: max must be float32, got bfloat16");
  EXPECT_EQ(message_of([&] {
              cross_entropy_forward(view(loss, {kN}), view(max, {kN}), view(sum, {kN}),
                                    view(int_logits, {kN, kV}), view(targets, {kN}));
            }),
            "ops::cross_entropy_forward: logits must be float32, bfloat16 or float16, got int64");
  // A 16-bit backward reads max: it must be there, fp32, one per token.
  EXPECT_EQ(message_of([&] {
              cross_entropy_backward(view(dlogits16, {kN, kV}), view(logits, {kN, kV}),
                                     view(targets, {kN}), tensor::Tensor{}, view(sum, {kN}),
                                     view(dloss, {kN}));
            }).rfind("ops::cross_entropy_backward: max ", 0),
            0u);
}

}  // namespace
}  // namespace mds::ops
