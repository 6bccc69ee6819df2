// The tensor-core flash attention on a device (kernels::attention_forward/backward with
// AttentionKernel::kTensorCore; bf16 and fp16, head dims 64 and 128) against the host's 16-bit
// attention (ops::attention_* on host tensors: the fp32 ops on the widened inputs, each output
// rounded once) and against the SIMT kernels (kSimt) on the same device.
//
// Bounds: elementwise, those of tests/unit/attention_tc_bounds.h (derived there and in
// docs/cuda.md: P and dS rounded to 16 bits before their products, delta from the stored ctx,
// fp32 accumulation, the final roundings); the emulated twin of this test
// (tests/unit/kernels_emulated_attention_tc_test.cpp) measured at most 0.82 of them. The hardware
// mma sums its 16 products in another order and precision than the emulation: the fp32 terms of
// the bounds cover it. lse within 1e-6 of the definition in double. Reruns bit-identical; the lse
// of either family serves the other's backward within the same bounds; kAuto picks the
// tensor-core kernels exactly where they apply; the keep bits are the host's masks and serve
// the backward bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "kernels/attention.h"
#include "model/alibi.h"
#include "ops/attention.h"
#include "tensor/round_to.h"
#include "tensor/tensor.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/attention_keep_bits_oracle.h"
#include "tests/unit/attention_tc_bounds.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_floats;
using kernels::AttentionKernel;

struct Case {
  std::int64_t s, b, np, hn;
  float coeff;
  float p = 0.0f;  // attention dropout
  std::int64_t first_head = 0, stream_heads = 0;
  bool alibi = false;  // ALiBi's key bias (model/alibi.h) of these heads of the layer
};
// One token, partial and whole 64-row tiles, several batches and heads, coeff > 1, GPT-2's
// sequence length, dropout with a TP shard's head range.
const Case kCases[] = {
    {1, 1, 1, 64, 1.0f},    {17, 2, 3, 64, 2.0f},        {64, 1, 2, 128, 1.0f},
    {65, 2, 1, 128, 1.0f},  {257, 1, 2, 64, 3.0f},       {1024, 1, 1, 64, 1.0f},
    {300, 1, 1, 128, 1.0f}, {130, 2, 2, 64, 1.0f, 0.1f}, {97, 1, 2, 128, 2.0f, 0.1f, 1, 4}};

ops::cpu::AttentionDims dims_of(const Case& c) {
  return {c.s, c.b, c.np, c.hn, c.first_head, c.stream_heads};
}

ops::DropoutStream dropout_of(const Case& c) {
  return {c.p, 0x5EEDull, 19};
}

// The ALiBi key bias of a case's heads ([np, s], rounded to T as a T run's params hold it), or an
// empty vector.
template <typename T>
std::vector<float> key_bias_of(const Case& c) {
  if (!c.alibi) return {};
  const std::int64_t layer_heads = c.stream_heads > 0 ? c.stream_heads : c.np;
  return model::alibi_key_bias(layer_heads, c.first_head, c.np, c.s, tensor::dtype_of<T>());
}

template <typename T>
std::vector<T> halves(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::vector<T> v;
  for (const float x : random_floats(n, seed, lo, hi)) v.push_back(tensor::round_to<T>(x));
  return v;
}

template <typename T>
std::vector<float> widened(const std::vector<T>& v) {
  std::vector<float> out;
  for (const T x : v) out.push_back(tensor::to_float(x));
  return out;
}

template <typename T>
std::vector<std::uint16_t> bits(const std::vector<T>& v) {
  std::vector<std::uint16_t> out;
  for (const T x : v) out.push_back(x.bits);
  return out;
}

// log Σ_{j ≤ i} exp(z_ij) of every (batch, head, query) row in double, z = coeff·α·q·k plus the
// ALiBi bias of key j (bias: [np, s], or empty).
std::vector<float> reference_lse(const std::vector<float>& qkv, const Case& c,
                                 const std::vector<float>& bias) {
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
        const double key_bias =
            bias.empty() ? 0.0 : bias[static_cast<std::size_t>((bh % c.np) * c.s + j)];
        z.push_back(key_bias + c.coeff * alpha * dot);
        max = std::max(max, z.back());
      }
      for (const double v : z) sum += std::exp(v - max);
      lse[static_cast<std::size_t>(bh * c.s + i)] = static_cast<float>(max + std::log(sum));
    }
  }
  return lse;
}

// The host's 16-bit attention and the bounds around it.
template <typename T>
struct Reference {
  std::vector<T> qkv, dctx, dqkv0, ctx, dqkv;
  std::vector<float> lse, key_bias;
  attention_tc_test::Bounds bounds;
};

template <typename T>
Reference<T> reference(const Case& c) {
  const tensor::Shape qkv_shape{c.s, c.b, c.np * 3 * c.hn}, ctx_shape{c.s, c.b, c.np * c.hn};
  const tensor::Shape probs_shape{c.b, c.np, c.s, c.s};
  Reference<T> r;
  r.qkv = halves<T>(static_cast<std::size_t>(qkv_shape.numel()), 30, -2.0f, 2.0f);
  r.dctx = halves<T>(static_cast<std::size_t>(ctx_shape.numel()), 31, -1.0f, 1.0f);
  r.dqkv0 = halves<T>(r.qkv.size(), 32, -0.01f, 0.01f);
  r.ctx.resize(r.dctx.size());
  r.dqkv = r.dqkv0;
  std::vector<float> probs(static_cast<std::size_t>(probs_shape.numel())), dprobs(probs.size());
  std::vector<float> dropped;
  const auto t = [](auto& v, const tensor::Shape& shape) {
    return tensor::Tensor(
        v.data(), tensor::dtype_of<typename std::decay_t<decltype(v)>::value_type>(), shape);
  };
  r.key_bias = key_bias_of<T>(c);
  ops::attention_probs_forward(t(probs, probs_shape), t(r.qkv, qkv_shape), c.coeff,
                               r.key_bias.empty() ? tensor::Tensor{} : t(r.key_bias, {c.np, c.s}));
  if (c.p == 0.0f) {
    dropped = probs;
    ops::attention_context_forward(t(r.ctx, ctx_shape), t(probs, probs_shape), t(r.qkv, qkv_shape));
    ops::attention_context_backward(t(dprobs, probs_shape), t(r.dqkv, qkv_shape),
                                    t(r.dctx, ctx_shape), t(probs, probs_shape),
                                    t(r.qkv, qkv_shape));
  } else {
    dropped.resize(probs.size());
    const ops::HeadRange heads{c.first_head, c.stream_heads};
    ops::attention_context_forward_with_dropout(t(r.ctx, ctx_shape), t(dropped, probs_shape),
                                                t(probs, probs_shape), t(r.qkv, qkv_shape),
                                                dropout_of(c), heads);
    ops::attention_context_backward_with_dropout(
        t(dprobs, probs_shape), t(r.dqkv, qkv_shape), t(dropped, probs_shape), t(r.dctx, ctx_shape),
        t(probs, probs_shape), t(r.qkv, qkv_shape), dropout_of(c), heads);
  }
  ops::attention_probs_backward(t(r.dqkv, qkv_shape), t(dprobs, probs_shape), t(probs, probs_shape),
                                t(r.qkv, qkv_shape), c.coeff);
  r.lse = reference_lse(widened(r.qkv), c, r.key_bias);
  r.bounds = attention_tc_test::attention_bounds(attention_tc_test::bound_inputs(
      c.s, c.b, c.np, c.hn, c.coeff, r.qkv, r.dctx, r.ctx, probs, dropped, r.key_bias));
  return r;
}

constexpr tensor::DType dtype_of_half(bool bf16) {
  return bf16 ? tensor::DType::kBFloat16 : tensor::DType::kFloat16;
}

// One run on the device: forward with one kernel family, backward with another; ctx starts
// poisoned (0xFFFF, NaN in both types), lse NaN; dqkv from dqkv0.
template <typename T>
struct DeviceRun {
  std::vector<T> ctx, dqkv;
  std::vector<float> lse;
  std::vector<std::uint32_t> keep;  // the keep bits, where the run kept them (poisoned before)
};

// keep: the forward writes the dropout's keep bits and the backward reads them.
template <typename T>
DeviceRun<T> run(const Case& c, const Reference<T>& r, AttentionKernel forward,
                 AttentionKernel backward, bool keep = false) {
  const tensor::DType dtype = dtype_of_half(std::is_same_v<T, tensor::BFloat16>);
  DeviceArray<T> qkv(r.qkv), dctx(r.dctx), ctx(r.ctx.size()), dqkv(r.dqkv0);
  DeviceArray<float> lse(r.lse.size());
  const auto keep_n =
      static_cast<std::size_t>(c.b * c.np * c.s * kernels::attention_keep_words(c.s));
  DeviceArray<std::uint32_t> keep_bits(std::vector<std::uint32_t>(keep ? keep_n : 1, 0xA5A5A5A5u));
  std::uint32_t* bits_or_null = keep ? keep_bits.get() : nullptr;
  DeviceArray<float> bias(r.key_bias.empty() ? std::vector<float>(1, 0.0f) : r.key_bias);
  const float* bias_or_null = r.key_bias.empty() ? nullptr : bias.get();
  kernels::attention_forward(ctx.get(), lse.get(), qkv.get(), dtype, dims_of(c), c.coeff,
                             dropout_of(c), nullptr, forward, bits_or_null, nullptr, bias_or_null);
  kernels::attention_backward(dqkv.get(), dctx.get(), ctx.get(), lse.get(), qkv.get(), dtype,
                              dims_of(c), c.coeff, dropout_of(c), nullptr, backward, true,
                              bits_or_null, nullptr, nullptr, bias_or_null);
  return {ctx.download(), dqkv.download(), lse.download(),
          keep ? keep_bits.download() : std::vector<std::uint32_t>{}};
}

template <typename T>
void expect_within_bounds(const Case& c, const Reference<T>& r, const DeviceRun<T>& got,
                          bool check_ctx, const char* what) {
  const auto hn = static_cast<std::size_t>(c.hn), head = 3 * hn;
  const auto ctx = attention_tc_test::measure(got.ctx, r.ctx, r.bounds.ctx, 0, hn, hn);
  const auto dq = attention_tc_test::measure(got.dqkv, r.dqkv, r.bounds.dqkv, 0, hn, head);
  const auto dk = attention_tc_test::measure(got.dqkv, r.dqkv, r.bounds.dqkv, hn, hn, head);
  const auto dv = attention_tc_test::measure(got.dqkv, r.dqkv, r.bounds.dqkv, 2 * hn, hn, head);
  if (check_ctx) {
    EXPECT_EQ(ctx.beyond, 0u) << what << " ctx, worst share " << ctx.worst_share;
  }
  EXPECT_EQ(dq.beyond, 0u) << what << " dq, worst share " << dq.worst_share;
  EXPECT_EQ(dk.beyond, 0u) << what << " dk, worst share " << dk.worst_share;
  EXPECT_EQ(dv.beyond, 0u) << what << " dv, worst share " << dv.worst_share;
  MDS_EXPECT_CLOSE(got.lse, r.lse, 1e-6);
  std::printf(
      "[ measured ] %s: worst error/bound ctx %.3f dq %.3f dk %.3f dv %.3f; relative ctx "
      "%.2e dq %.2e dk %.2e dv %.2e\n",
      what, ctx.worst_share, dq.worst_share, dk.worst_share, dv.worst_share, ctx.relative,
      dq.relative, dk.relative, dv.relative);
}

template <typename T>
class AttentionTcOnDevice : public ::testing::Test {};
using HalfTypes = ::testing::Types<tensor::BFloat16, tensor::Float16>;
TYPED_TEST_SUITE(AttentionTcOnDevice, HalfTypes);

TYPED_TEST(AttentionTcOnDevice, WithinBoundsOfHostAndRepeats) {
  using T = TypeParam;
  for (const Case& c : kCases) {
    const std::string what = std::string(std::is_same_v<T, tensor::BFloat16> ? "bf16" : "fp16") +
                             " s=" + std::to_string(c.s) + " b=" + std::to_string(c.b) +
                             " np=" + std::to_string(c.np) + " hn=" + std::to_string(c.hn) +
                             " p=" + std::to_string(c.p);
    SCOPED_TRACE(what);
    const Reference<T> r = reference<T>(c);
    const DeviceRun<T> tc = run(c, r, AttentionKernel::kTensorCore, AttentionKernel::kTensorCore);
    expect_within_bounds(c, r, tc, true, (what + " tc").c_str());
    // No atomics, fixed orders: the same bits again.
    const DeviceRun<T> again =
        run(c, r, AttentionKernel::kTensorCore, AttentionKernel::kTensorCore);
    EXPECT_EQ(bits(again.ctx), bits(tc.ctx));
    EXPECT_EQ(again.lse, tc.lse);
    EXPECT_EQ(bits(again.dqkv), bits(tc.dqkv));
  }
}

// The backward's two ways to dq: from the dSᵀ the dk/dv kernel stores (kTensorCore, as training
// runs at GPT-2's sizes) and computing dS again (as beyond 2 GiB of dSᵀ): both within the bounds,
// with and without keep bits; under the emulation they give the same bits
// (KernelsEmulatedAttentionTc.DqFromStoredDsIsDqKernelsBits), on a device the two kernels' S may
// differ in its last bit.
TYPED_TEST(AttentionTcOnDevice, DqRecomputedOrFromStoredDsWithinBounds) {
  using T = TypeParam;
  for (const Case& c : {kCases[1], kCases[4], kCases[7], kCases[8]}) {
    SCOPED_TRACE("s=" + std::to_string(c.s) + " hn=" + std::to_string(c.hn) +
                 " p=" + std::to_string(c.p));
    const Reference<T> r = reference<T>(c);
    for (const bool keep : {false, true}) {
      const DeviceRun<T> stored =
          run(c, r, AttentionKernel::kTensorCore, AttentionKernel::kTensorCore, keep);
      const DeviceRun<T> recomputed =
          run(c, r, AttentionKernel::kTensorCore, AttentionKernel::kTensorCoreRecomputingDq, keep);
      expect_within_bounds(c, r, stored, true, "dq from the stored dS");
      expect_within_bounds(c, r, recomputed, true, "dq recomputing dS");
      std::printf(
          "[ measured ] dq from stored dS against recomputed (keep bits %d): relative %.2e\n",
          keep ? 1 : 0, gpu_test::relative_error(widened(stored.dqkv), widened(recomputed.dqkv)));
    }
  }
}

// The launch shapes under trial at head dim 64 (kTensorCoreTrialShapes: forward blocks of 128
// rows with two m16 atoms a warp, dk/dv steps of 32 query rows) compute each row and each sum as
// the default shapes do: the same bits (ctx, lse, dqkv and the keep bits the forward stores).
TYPED_TEST(AttentionTcOnDevice, TrialShapesGiveTheSameBits) {
  using T = TypeParam;
  for (const Case& c : kCases) {
    if (c.hn != 64) continue;
    SCOPED_TRACE("s=" + std::to_string(c.s) + " b=" + std::to_string(c.b) +
                 " p=" + std::to_string(c.p));
    const Reference<T> r = reference<T>(c);
    for (const bool keep : {false, true}) {
      const DeviceRun<T> plain =
          run(c, r, AttentionKernel::kTensorCore, AttentionKernel::kTensorCore, keep);
      const DeviceRun<T> trial = run(c, r, AttentionKernel::kTensorCoreTrialShapes,
                                     AttentionKernel::kTensorCoreTrialShapes, keep);
      EXPECT_EQ(bits(trial.ctx), bits(plain.ctx)) << "keep bits " << keep;
      EXPECT_EQ(trial.lse, plain.lse) << "keep bits " << keep;
      EXPECT_EQ(trial.keep, plain.keep) << "keep bits " << keep;
      EXPECT_EQ(bits(trial.dqkv), bits(plain.dqkv)) << "keep bits " << keep;
    }
  }
}

// Against the SIMT kernels on the same device: each family's lse serves the other's backward
// within the same bounds, and the SIMT kernels themselves stay inside them.
TYPED_TEST(AttentionTcOnDevice, LseInterchangeableWithSimtKernels) {
  using T = TypeParam;
  for (const Case& c : {kCases[4], kCases[7], kCases[8]}) {
    SCOPED_TRACE("s=" + std::to_string(c.s) + " hn=" + std::to_string(c.hn));
    const Reference<T> r = reference<T>(c);
    const DeviceRun<T> simt = run(c, r, AttentionKernel::kSimt, AttentionKernel::kSimt);
    expect_within_bounds(c, r, simt, true, "simt/simt");
    expect_within_bounds(c, r, run(c, r, AttentionKernel::kTensorCore, AttentionKernel::kSimt),
                         true, "tc/simt");
    expect_within_bounds(c, r, run(c, r, AttentionKernel::kSimt, AttentionKernel::kTensorCore),
                         false, "simt/tc");
    const DeviceRun<T> tc = run(c, r, AttentionKernel::kTensorCore, AttentionKernel::kTensorCore);
    std::printf("[ measured ] tc against simt: relative ctx %.2e dqkv %.2e\n",
                gpu_test::relative_error(widened(tc.ctx), widened(simt.ctx)),
                gpu_test::relative_error(widened(tc.dqkv), widened(simt.dqkv)));
  }
}

// Keep bits (kernels/attention.h): either forward writes the host's masks without changing its
// outputs, and the tensor-core backward reading them gives the bits of the one drawing the masks.
TYPED_TEST(AttentionTcOnDevice, KeepBitsAreTheHostMasksAndServeTheBackward) {
  using T = TypeParam;
  const Case gpt2{1024, 2, 3, 64, 1.0f, 0.1f, 3, 12};
  for (const Case& c : {kCases[7], kCases[8], gpt2}) {
    SCOPED_TRACE("s=" + std::to_string(c.s) + " hn=" + std::to_string(c.hn));
    const Reference<T> r = reference<T>(c);
    for (const AttentionKernel forward : {AttentionKernel::kTensorCore, AttentionKernel::kSimt}) {
      SCOPED_TRACE(forward == AttentionKernel::kSimt ? "simt forward" : "tc forward");
      const DeviceRun<T> drawn = run(c, r, forward, AttentionKernel::kTensorCore);
      const DeviceRun<T> kept = run(c, r, forward, AttentionKernel::kTensorCore, true);
      EXPECT_EQ(bits(kept.ctx), bits(drawn.ctx));
      EXPECT_EQ(kept.lse, drawn.lse);
      EXPECT_EQ(bits(kept.dqkv), bits(drawn.dqkv));
      EXPECT_EQ(attention_keep_bits_test::differing_from_host(
                    {c.s, c.b, c.np, c.first_head, c.stream_heads}, dropout_of(c), kept.keep),
                0u);
    }
  }
}

// ALiBi (BLOOM's slopes for the layer's heads, rounded to T): the tensor-core kernels within the
// bounds of the biased host attention (|z| counting the bias) and repeating bit for bit; kAuto
// takes them; the SIMT kernels within the same bounds; dq from the stored dSᵀ and recomputed;
// the trial shapes give the same bits. GPT-2's sequence length with a TP shard's heads, coeff > 1
// at head dim 128, dropout.
TYPED_TEST(AttentionTcOnDevice, AlibiKeyBiasWithinBoundsOfHost) {
  using T = TypeParam;
  const Case cases[] = {{1024, 1, 2, 64, 1.0f, 0.0f, 2, 16, true},
                        {257, 2, 2, 128, 3.0f, 0.0f, 0, 0, true},
                        {130, 2, 2, 64, 1.0f, 0.1f, 1, 4, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE("s=" + std::to_string(c.s) + " hn=" + std::to_string(c.hn) +
                 " p=" + std::to_string(c.p));
    const Reference<T> r = reference<T>(c);
    const DeviceRun<T> tc = run(c, r, AttentionKernel::kTensorCore, AttentionKernel::kTensorCore);
    expect_within_bounds(c, r, tc, true, "alibi tc/tc");
    const DeviceRun<T> automatic = run(c, r, AttentionKernel::kAuto, AttentionKernel::kAuto);
    EXPECT_EQ(bits(automatic.ctx), bits(tc.ctx));
    EXPECT_EQ(automatic.lse, tc.lse);
    EXPECT_EQ(bits(automatic.dqkv), bits(tc.dqkv));
    expect_within_bounds(c, r, run(c, r, AttentionKernel::kSimt, AttentionKernel::kSimt), true,
                         "alibi simt/simt");
    expect_within_bounds(
        c, r, run(c, r, AttentionKernel::kTensorCore, AttentionKernel::kTensorCoreRecomputingDq),
        true, "alibi dq recomputing dS");
    if (c.hn == 64) {
      const DeviceRun<T> trial = run(c, r, AttentionKernel::kTensorCoreTrialShapes,
                                     AttentionKernel::kTensorCoreTrialShapes);
      EXPECT_EQ(bits(trial.ctx), bits(tc.ctx));
      EXPECT_EQ(trial.lse, tc.lse);
      EXPECT_EQ(bits(trial.dqkv), bits(tc.dqkv));
    }
  }
}

// kAuto takes the tensor-core kernels for bf16/fp16 at head dims 64 and 128 with 16-byte aligned
// pointers (the same bits as kTensorCore), the SIMT kernels otherwise (the same bits as kSimt:
// another head dim, or a view starting 2 bytes into a buffer); kTensorCore refuses with one line.
TEST(AttentionTcDispatch, AutoPicksTensorCoresWhereTheyApply) {
  using T = tensor::BFloat16;
  const Case c{70, 1, 2, 64, 1.0f};
  const Reference<T> r = reference<T>(c);
  const DeviceRun<T> automatic = run(c, r, AttentionKernel::kAuto, AttentionKernel::kAuto);
  const DeviceRun<T> tc = run(c, r, AttentionKernel::kTensorCore, AttentionKernel::kTensorCore);
  EXPECT_EQ(bits(automatic.ctx), bits(tc.ctx));
  EXPECT_EQ(bits(automatic.dqkv), bits(tc.dqkv));
  EXPECT_TRUE(kernels::attention_tensor_core_supported(tensor::DType::kFloat16, 128));
  EXPECT_FALSE(kernels::attention_tensor_core_supported(tensor::DType::kFloat32, 64));
  EXPECT_FALSE(kernels::attention_tensor_core_supported(tensor::DType::kBFloat16, 32));

  // A qkv view one element into its buffer: misaligned for 16-byte loads.
  const auto qkv_n = r.qkv.size(), ctx_n = r.ctx.size();
  std::vector<T> shifted(qkv_n + 1);
  std::copy(r.qkv.begin(), r.qkv.end(), shifted.begin() + 1);
  DeviceArray<T> qkv(shifted), ctx_auto(ctx_n), ctx_simt(ctx_n);
  DeviceArray<float> lse(r.lse.size());
  const auto dims = dims_of(c);
  kernels::attention_forward(ctx_auto.get(), lse.get(), qkv.get() + 1, tensor::DType::kBFloat16,
                             dims, c.coeff, {}, nullptr, AttentionKernel::kAuto);
  kernels::attention_forward(ctx_simt.get(), lse.get(), qkv.get() + 1, tensor::DType::kBFloat16,
                             dims, c.coeff, {}, nullptr, AttentionKernel::kSimt);
  EXPECT_EQ(bits(ctx_auto.download()), bits(ctx_simt.download()));
  const auto refuses = [&](tensor::DType dtype, std::int64_t hn, const void* q) {
    try {
      ops::cpu::AttentionDims d = dims;
      d.hn = hn;
      kernels::attention_forward(ctx_auto.get(), lse.get(), q, dtype, d, c.coeff, {}, nullptr,
                                 AttentionKernel::kTensorCore);
      return std::string("no failure");
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(refuses(tensor::DType::kBFloat16, 64, qkv.get() + 1).find("misaligned"),
            std::string::npos);
  EXPECT_NE(refuses(tensor::DType::kBFloat16, 32, qkv.get()).find("head dim 32"),
            std::string::npos);
  EXPECT_NE(refuses(tensor::DType::kFloat32, 64, qkv.get()).find("float32"), std::string::npos);
}

}  // namespace
}  // namespace mds
