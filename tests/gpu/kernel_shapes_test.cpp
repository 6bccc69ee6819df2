// Launch shapes picked by timing (ops/launch_variants.h, kernels/variant_trials.h): with a
// LaunchVariantChoices the tensor-core attention at head dim 64 and the 16-bit cross entropy of
// a training step time their same-bits variants on a problem's first call and keep the fastest.
// Every output must be the default call's bytes, on the first call (which runs the trials) and
// on the later ones (which take the pick), and every variant must have matched variant 0's bits
// in its trial: on the hardware, not only under the emulation, the shapes are the same
// arithmetic. The picks and their times are printed.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "ops/cross_entropy.h"
#include "ops/device_context.h"
#include "ops/launch_variants.h"
#include "tensor/round_to.h"
#include "tests/gpu/device_tensors.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using kernels::AttentionKernel;

std::vector<std::uint16_t> bf16_bits(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::vector<std::uint16_t> out;
  for (const float x : gpu_test::random_floats(n, seed, lo, hi)) {
    out.push_back(tensor::round_to<tensor::BFloat16>(x).bits);
  }
  return out;
}

// Every trial of every pick matched variant 0's bits; the picks printed.
void expect_same_bits_trials(const ops::LaunchVariantChoices& choices, std::size_t picks) {
  ASSERT_EQ(choices.picks().size(), picks);
  for (const ops::LaunchVariantChoices::Pick& pick : choices.picks()) {
    std::printf("[ measured ] %s\n", ops::describe(pick).c_str());
    ASSERT_FALSE(pick.trials.empty()) << pick.key << " was not timed";
    for (std::size_t i = 0; i < pick.trials.size(); ++i) {
      EXPECT_TRUE(pick.trials[i].same_bits) << pick.key << ": " << pick.names[i];
      EXPECT_GT(pick.trials[i].ms, 0.0f) << pick.key << ": " << pick.names[i];
    }
  }
}

struct AttentionCase {
  std::int64_t s, b, np;
  float p;
  bool keep_bits;
};

struct AttentionRun {
  std::vector<std::uint16_t> ctx, dqkv;
  std::vector<float> lse;
  std::vector<std::uint32_t> keep;
};

// A forward then a backward (accumulating into a random dqkv, or writing it) at head dim 64.
AttentionRun run_attention(const AttentionCase& c, bool accumulate,
                           ops::LaunchVariantChoices* variants) {
  constexpr std::int64_t kHn = 64;
  const ops::cpu::AttentionDims d{c.s, c.b, c.np, kHn, 0, 0};
  const ops::DropoutStream dropout{c.p, 0x5EEDull, 3};
  const auto qkv_n = static_cast<std::size_t>(c.s * c.b * c.np * 3 * kHn);
  const auto ctx_n = static_cast<std::size_t>(c.s * c.b * c.np * kHn);
  DeviceArray<std::uint16_t> qkv(bf16_bits(qkv_n, 40, -2.0f, 2.0f));
  DeviceArray<std::uint16_t> dctx(bf16_bits(ctx_n, 41, -1.0f, 1.0f));
  DeviceArray<std::uint16_t> dqkv(bf16_bits(qkv_n, 42, -0.01f, 0.01f));
  DeviceArray<std::uint16_t> ctx(ctx_n);
  DeviceArray<float> lse(static_cast<std::size_t>(c.b * c.np * c.s));
  DeviceArray<std::uint32_t> keep(
      c.keep_bits ? static_cast<std::size_t>(c.b * c.np * c.s * kernels::attention_keep_words(c.s))
                  : 1);
  std::uint32_t* keep_or_null = c.keep_bits ? keep.get() : nullptr;
  kernels::attention_forward(ctx.get(), lse.get(), qkv.get(), tensor::DType::kBFloat16, d, 1.0f,
                             dropout, nullptr, AttentionKernel::kAuto, keep_or_null, variants);
  kernels::attention_backward(dqkv.get(), dctx.get(), ctx.get(), lse.get(), qkv.get(),
                              tensor::DType::kBFloat16, d, 1.0f, dropout, nullptr,
                              AttentionKernel::kAuto, accumulate, keep_or_null, nullptr, variants);
  return {ctx.download(), dqkv.download(), lse.download(), keep.download()};
}

void expect_same_run(const AttentionRun& got, const AttentionRun& want, const char* what) {
  EXPECT_EQ(got.ctx, want.ctx) << what;
  EXPECT_EQ(got.lse, want.lse) << what;
  EXPECT_EQ(got.keep, want.keep) << what;
  EXPECT_EQ(got.dqkv, want.dqkv) << what;
}

// GPT-2's sequence (the keep bits drawn first), a partial last tile, no dropout.
TEST(KernelShapesOnDevice, AttentionPicksGiveTheDefaultBits) {
  for (const AttentionCase& c :
       {AttentionCase{1024, 2, 3, 0.1f, true}, AttentionCase{130, 2, 2, 0.1f, false},
        AttentionCase{257, 1, 2, 0.0f, false}}) {
    SCOPED_TRACE("s=" + std::to_string(c.s) + " p=" + std::to_string(c.p));
    for (const bool accumulate : {true, false}) {
      const AttentionRun want = run_attention(c, accumulate, nullptr);
      ops::LaunchVariantChoices choices;
      expect_same_run(run_attention(c, accumulate, &choices), want, "the trials' call");
      expect_same_bits_trials(choices, 2);
      expect_same_run(run_attention(c, accumulate, &choices), want, "a call taking the pick");
      EXPECT_EQ(choices.picks().size(), 2u) << "a known problem timed again";
    }
  }
}

// Head dim 128 has one shape (nothing timed); a forced kernel family ignores the choices.
TEST(KernelShapesOnDevice, AttentionWithoutAlternativesPicksNothing) {
  const ops::cpu::AttentionDims d{64, 1, 2, 128, 0, 0};
  DeviceArray<std::uint16_t> qkv(bf16_bits(64 * 2 * 3 * 128, 43, -2.0f, 2.0f));
  DeviceArray<std::uint16_t> ctx(64 * 2 * 128);
  DeviceArray<float> lse(2 * 64);
  ops::LaunchVariantChoices choices;
  kernels::attention_forward(ctx.get(), lse.get(), qkv.get(), tensor::DType::kBFloat16, d, 1.0f, {},
                             nullptr, AttentionKernel::kAuto, nullptr, &choices);
  const ops::cpu::AttentionDims d64{64, 1, 2, 64, 0, 0};
  kernels::attention_forward(ctx.get(), lse.get(), qkv.get(), tensor::DType::kBFloat16, d64, 1.0f,
                             {}, nullptr, AttentionKernel::kTensorCore, nullptr, &choices);
  (void)ctx.download();
  EXPECT_TRUE(choices.picks().empty());
}

struct CrossEntropyRun {
  std::vector<float> loss;
  std::vector<std::uint16_t> grad;
};

CrossEntropyRun run_cross_entropy(std::int64_t n, std::int64_t v,
                                  ops::LaunchVariantChoices* variants) {
  const auto un = static_cast<std::size_t>(n);
  DeviceArray<std::uint16_t> logits(bf16_bits(un * static_cast<std::size_t>(v), 50, -8.0f, 8.0f));
  std::mt19937 rng(51);
  std::vector<std::int64_t> host_targets(un);
  for (auto& t : host_targets) t = std::uniform_int_distribution<std::int64_t>(0, v - 1)(rng);
  host_targets[0] = v + 2;  // no target in the row
  DeviceArray<std::int64_t> targets(host_targets);
  DeviceArray<float> dloss(gpu_test::random_floats(un, 52));
  DeviceArray<float> loss(un);
  kernels::cross_entropy_forward_backward(loss.get(), logits.get(), logits.get(),
                                          tensor::DType::kBFloat16, targets.get(), dloss.get(), n,
                                          v, nullptr, variants);
  return {loss.download(), logits.download()};
}

// In place, as the training step calls it; 2600 rows of GPT-2's vocabulary are more than the
// trials' rows on an H100 (four times its L2), 37 rows fewer.
TEST(KernelShapesOnDevice, CrossEntropyPickGivesTheOneKernelsBits) {
  for (const std::int64_t n : {2600, 37}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const CrossEntropyRun want = run_cross_entropy(n, 50304, nullptr);
    ops::LaunchVariantChoices choices;
    const CrossEntropyRun first = run_cross_entropy(n, 50304, &choices);
    EXPECT_EQ(first.loss, want.loss);
    EXPECT_EQ(first.grad, want.grad);
    expect_same_bits_trials(choices, 1);
    const CrossEntropyRun again = run_cross_entropy(n, 50304, &choices);
    EXPECT_EQ(again.loss, want.loss);
    EXPECT_EQ(again.grad, want.grad);
    EXPECT_EQ(choices.picks().size(), 1u);
  }
}

// A context times its kernels' shapes only when asked, and reports the picks a line each.
TEST(KernelShapesOnDevice, ContextTimesOnlyWhenAsked) {
  ops::DeviceContext ctx(tensor::Device{tensor::DeviceKind::kCuda, 0});
  const std::int64_t n = 40, v = 1000;
  const auto logits = [&] {
    std::vector<tensor::BFloat16> values;
    for (const float x : gpu_test::random_floats(static_cast<std::size_t>(n * v), 60, -4.0f, 4.0f))
      values.push_back(tensor::round_to<tensor::BFloat16>(x));
    return values;
  };
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n), 3);
  const auto call = [&] {
    gpu_test::Mirrored<tensor::BFloat16> l(ctx, logits(), {n, v});
    gpu_test::Mirrored<std::int64_t> t(ctx, labels, {n});
    gpu_test::Mirrored<float> dloss(ctx, std::vector<float>(static_cast<std::size_t>(n), 0.5f),
                                    {n});
    gpu_test::Mirrored<float> loss(ctx, std::vector<float>(static_cast<std::size_t>(n)), {n});
    ops::cross_entropy_forward_backward(ctx, loss.d, l.d, l.d, t.d, dloss.d);
    return l.download(ctx);
  };
  const auto fixed = call();
  EXPECT_TRUE(ctx.kernel_shape_picks().empty());
  ctx.time_kernel_shapes();
  const auto timed = call();
  ASSERT_EQ(fixed.size(), timed.size());
  for (std::size_t i = 0; i < fixed.size(); ++i) ASSERT_EQ(fixed[i].bits, timed[i].bits) << i;
  const std::vector<std::string> lines = ctx.kernel_shape_picks();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("cross_entropy_forward_backward bfloat16 n=40 v=1000: ", 0), 0u)
      << lines[0];
}

}  // namespace
}  // namespace mds
