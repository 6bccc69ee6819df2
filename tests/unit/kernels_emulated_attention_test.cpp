// The flash-attention kernels' device code (kernels/attention_kernels.cuh) run on the CPU under a
// SIMT emulation, against the CPU attention (ops/cpu/attention): their indexing, causal masking,
// tiling, online softmax, the attention dropout (the CPU's Philox masks, head ranges included),
// the two-kernel deterministic backward and their barriers, checked where there is no GPU.
// tests/gpu/attention_test.cpp runs the same comparison on a device. The 16-bit instances (bf16
// and fp16 storage of q, k, v, ctx, dctx, dqkv) run against the host's 16-bit attention ops.
#include "tests/unit/simt_emulation.h"

namespace mds::kernels::attention_detail {
// inline: kernels_emulated_attention_tc_test.cpp runs these kernels too and defines the same.
inline float smem[simt::kSharedFloats];
}  // namespace mds::kernels::attention_detail

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/attention_kernels.cuh"
#include "model/alibi.h"
#include "ops/attention.h"
#include "ops/cpu/attention.h"
#include "tensor/tensor.h"
#include "tests/unit/emulated_storage.h"

namespace mds {
namespace {

namespace ad = kernels::attention_detail;
using emulated::bits;
using emulated::count_beyond_one_ulp;
using emulated::HostBits16Io;
using emulated::widened;

struct Case {
  std::int64_t s, b, np, hn;
  float coeff;
  // Attention dropout (p = 0: none) and the heads of the layer these np are (0: np).
  float p = 0.0f;
  std::int64_t first_head = 0, stream_heads = 0;
  bool alibi = false;  // ALiBi's key bias (model/alibi.h) for np heads
};

// The ALiBi key bias of a case ([np, s]), or an empty vector.
std::vector<float> key_bias_of(const Case& c) {
  if (!c.alibi) return {};
  return model::alibi_key_bias(c.np, 0, c.np, c.s, tensor::DType::kFloat32);
}

ops::DropoutStream dropout_of(const Case& c) {
  return {c.p, 0x5EEDull, 77};
}

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double relative_error(const std::vector<float>& out, const std::vector<float>& ref) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double d = static_cast<double>(out[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(diff / norm);
}

// log Σ_{j ≤ i} exp(z_ij) of every (batch, head, query) row in double, z = coeff·α·q·k (plus the
// ALiBi bias of key j).
std::vector<float> reference_lse(const std::vector<float>& qkv, const Case& c, std::int64_t hn) {
  const double alpha = 1.0 / (std::sqrt(static_cast<double>(hn)) * c.coeff);
  const std::int64_t ld = c.b * c.np * 3 * hn;
  const std::vector<float> bias = key_bias_of(c);
  std::vector<float> lse(static_cast<std::size_t>(c.b * c.np * c.s));
  for (std::int64_t bh = 0; bh < c.b * c.np; ++bh) {
    for (std::int64_t i = 0; i < c.s; ++i) {
      std::vector<double> z;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0.0;
        for (std::int64_t d = 0; d < hn; ++d) {
          dot += static_cast<double>(qkv[static_cast<std::size_t>(i * ld + bh * 3 * hn + d)]) *
                 qkv[static_cast<std::size_t>(j * ld + bh * 3 * hn + hn + d)];
        }
        z.push_back(c.coeff * alpha * dot +
                    (bias.empty() ? 0.0 : bias[static_cast<std::size_t>((bh % c.np) * c.s + j)]));
      }
      double max = -INFINITY, sum = 0.0;
      for (const double v : z) max = std::max(max, v);
      for (const double v : z) sum += std::exp(v - max);
      lse[static_cast<std::size_t>(bh * c.s + i)] = static_cast<float>(max + std::log(sum));
    }
  }
  return lse;
}

void poison_shared() {
  for (float& x : ad::smem) x = NAN;
}

struct Results {
  std::vector<float> ctx, lse, dqkv;
};

// The launches of kernels/attention.cu, emulated: forward, then dk/dv, then dq.
// The kernels' geometry and scaling as kernels/attention.cu's launch_of gives them.
struct Launch {
  ad::Geometry g;
  unsigned grid_x, grid_y;
  float alpha;
};

template <int kHn>
Launch launch_of(const Case& c, const float* key_bias = nullptr) {
  ad::Geometry g{c.s, c.b * c.np * 3 * kHn, c.b * c.np * kHn};
  g.key_bias = key_bias;
  // As kernels/attention.cu's launch_of.
  const ops::DropoutStream stream = dropout_of(c);
  g.dropout.p = stream.p;
  g.dropout.scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(stream.p)));
  g.dropout.seed = stream.seed;
  g.dropout.offset = stream.offset;
  g.dropout.np = c.np;
  g.dropout.first_head = c.first_head;
  g.dropout.stream_heads = c.stream_heads > 0 ? c.stream_heads : c.np;
  const auto grid_x = static_cast<unsigned>(c.b * c.np);
  const auto grid_y = static_cast<unsigned>((c.s + ad::kTile - 1) / ad::kTile);
  const auto alpha = static_cast<float>(1.0 / (std::sqrt(static_cast<double>(kHn)) * c.coeff));
  return {g, grid_x, grid_y, alpha};
}

template <int kHn>
Results run_kernels(const Case& c, const std::vector<float>& qkv, const std::vector<float>& dctx) {
  const std::vector<float> bias = key_bias_of(c);
  const Launch at = launch_of<kHn>(c, bias.empty() ? nullptr : bias.data());
  const ad::Geometry& g = at.g;
  const unsigned grid_x = at.grid_x, grid_y = at.grid_y;
  const float alpha = at.alpha;
  Results r{std::vector<float>(dctx.size(), NAN),
            std::vector<float>(static_cast<std::size_t>(c.b * c.np * c.s), NAN),
            std::vector<float>(qkv.size(), 0.0f)};
  simt::launch(
      grid_x, grid_y,
      [&] { ad::forward_kernel<kHn>(r.ctx.data(), r.lse.data(), qkv.data(), g, alpha, c.coeff); },
      poison_shared);
  simt::launch(
      grid_x, grid_y,
      [&] {
        ad::dkdv_kernel<kHn>(r.dqkv.data(), dctx.data(), r.ctx.data(), r.lse.data(), qkv.data(), g,
                             alpha, c.coeff);
      },
      poison_shared);
  simt::launch(
      grid_x, grid_y,
      [&] {
        ad::dq_kernel<kHn>(r.dqkv.data(), dctx.data(), r.ctx.data(), r.lse.data(), qkv.data(), g,
                           alpha, c.coeff);
      },
      poison_shared);
  return r;
}

template <int kHn>
void check_against_cpu(const Case& c) {
  SCOPED_TRACE(testing::Message() << "s=" << c.s << " b=" << c.b << " np=" << c.np << " hn=" << kHn
                                  << " coeff=" << c.coeff << " p=" << c.p << " heads "
                                  << c.first_head << "/" << c.stream_heads);
  const ops::cpu::AttentionDims d{c.s, c.b, c.np, kHn, c.first_head, c.stream_heads};
  const auto qkv_size = static_cast<std::size_t>(c.s * c.b * c.np * 3 * kHn);
  const auto ctx_size = static_cast<std::size_t>(c.s * c.b * c.np * kHn);
  const auto qkv = random_floats(qkv_size, 7, -2.0f, 2.0f);
  const auto dctx = random_floats(ctx_size, 8, -1.0f, 1.0f);
  std::vector<float> probs(static_cast<std::size_t>(c.b * c.np * c.s * c.s)), ctx(ctx_size);
  std::vector<float> dprobs(probs.size()), dqkv(qkv_size, 0.0f);
  const std::vector<float> bias = key_bias_of(c);
  ops::cpu::attention_probs_forward(probs.data(), qkv.data(), d, c.coeff,
                                    bias.empty() ? nullptr : bias.data());
  if (c.p == 0.0f) {
    ops::cpu::attention_context_forward(ctx.data(), probs.data(), qkv.data(), d);
    ops::cpu::attention_context_backward(dprobs.data(), dqkv.data(), dctx.data(), probs.data(),
                                         qkv.data(), d);
  } else {
    std::vector<float> dropped(probs.size());
    ops::cpu::attention_context_forward_with_dropout(ctx.data(), dropped.data(), probs.data(),
                                                     qkv.data(), d, dropout_of(c));
    ops::cpu::attention_context_backward_with_dropout(dprobs.data(), dqkv.data(), dropped.data(),
                                                      dctx.data(), probs.data(), qkv.data(), d,
                                                      dropout_of(c));
  }
  ops::cpu::attention_probs_backward(dqkv.data(), dprobs.data(), probs.data(), qkv.data(), d,
                                     c.coeff);

  const Results got = run_kernels<kHn>(c, qkv, dctx);
  // The bounds of tests/gpu/attention_test.cpp.
  EXPECT_LE(relative_error(got.ctx, ctx), 1e-5);
  EXPECT_LE(relative_error(got.dqkv, dqkv), 2e-5);
  EXPECT_LE(relative_error(got.lse, reference_lse(qkv, c, kHn)), 1e-6);
  // A fixed order: the same bits again.
  const Results again = run_kernels<kHn>(c, qkv, dctx);
  EXPECT_EQ(again.ctx, got.ctx);
  EXPECT_EQ(again.lse, got.lse);
  EXPECT_EQ(again.dqkv, got.dqkv);
}

TEST(KernelsEmulatedAttention, EveryHeadDimMatchesCpu) {
  check_against_cpu<8>({1, 1, 1, 8, 1.0f});
  check_against_cpu<8>({31, 3, 2, 8, 2.0f});
  check_against_cpu<16>({7, 2, 3, 16, 1.0f});
  check_against_cpu<32>({33, 1, 2, 32, 1.0f});
  check_against_cpu<64>({65, 2, 1, 64, 1.0f});
  check_against_cpu<96>({40, 1, 2, 96, 3.0f});
  check_against_cpu<128>({97, 1, 1, 128, 1.0f});
}

// Dropout inside the kernels: the context uses the dropped probabilities, the normalizer and lse
// do not, and the backward masks dp and dv with the same draws as the CPU's two halves. Heads
// [1, 3) of 4 number their masks as heads 1 and 2 of the whole layer (a TP shard's heads).
// ALiBi: the key bias divided by coeff joins each score in the forward and in the backward's
// recomputed probabilities, as the CPU's attention_probs_forward adds it (12 heads: the
// interleaved slopes; coeff 3; with dropout too).
TEST(KernelsEmulatedAttention, AlibiKeyBiasMatchesCpu) {
  check_against_cpu<8>({37, 2, 2, 8, 1.0f, 0.0f, 0, 0, true});
  check_against_cpu<16>({70, 1, 12, 16, 3.0f, 0.0f, 0, 0, true});
  check_against_cpu<32>({33, 2, 3, 32, 2.0f, 0.5f, 0, 0, true});
}

TEST(KernelsEmulatedAttention, DropoutMatchesCpuMasks) {
  check_against_cpu<8>({37, 2, 2, 8, 1.0f, 0.1f});
  check_against_cpu<16>({70, 1, 2, 16, 2.0f, 0.5f, 1, 4});
  check_against_cpu<32>({33, 3, 1, 32, 1.0f, 0.9f, 2, 3});
}

// ---- 16-bit storage --------------------------------------------------------------------------

template <typename T>
std::vector<T> random_halves(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::vector<T> v;
  for (const float x : random_floats(n, seed, lo, hi)) v.push_back(tensor::round_to<T>(x));
  return v;
}

template <typename T>
struct Results16 {
  std::vector<T> ctx;
  std::vector<float> lse;
  std::vector<T> dqkv;
};

// The 16-bit launches: ctx starts poisoned (0xFFFF, a NaN in bf16 and fp16), dqkv as given.
template <int kHn, typename T>
Results16<T> run_kernels16(const Case& c, const std::vector<T>& qkv, const std::vector<T>& dctx,
                           std::vector<T> dqkv) {
  using Io = HostBits16Io<T>;
  const Launch at = launch_of<kHn>(c);
  Results16<T> r{std::vector<T>(dctx.size(), T{0xFFFF}),
                 std::vector<float>(static_cast<std::size_t>(c.b * c.np * c.s), NAN),
                 std::move(dqkv)};
  simt::launch(
      at.grid_x, at.grid_y,
      [&] {
        ad::forward_kernel<kHn, Io>(r.ctx.data(), r.lse.data(), qkv.data(), at.g, at.alpha,
                                    c.coeff);
      },
      poison_shared);
  simt::launch(
      at.grid_x, at.grid_y,
      [&] {
        ad::dkdv_kernel<kHn, Io>(r.dqkv.data(), dctx.data(), r.ctx.data(), r.lse.data(), qkv.data(),
                                 at.g, at.alpha, c.coeff);
      },
      poison_shared);
  simt::launch(
      at.grid_x, at.grid_y,
      [&] {
        ad::dq_kernel<kHn, Io>(r.dqkv.data(), dctx.data(), r.ctx.data(), r.lse.data(), qkv.data(),
                               at.g, at.alpha, c.coeff);
      },
      poison_shared);
  return r;
}

template <typename T>
double relative_error16(const std::vector<T>& got, const std::vector<T>& want) {
  return relative_error(widened(got), widened(want));
}

template <int kHn, typename T>
void check_16bit_against_host(const Case& c) {
  SCOPED_TRACE(testing::Message() << (std::is_same_v<T, tensor::BFloat16> ? "bf16" : "fp16")
                                  << " s=" << c.s << " b=" << c.b << " np=" << c.np << " hn=" << kHn
                                  << " coeff=" << c.coeff << " p=" << c.p);
  const tensor::Shape qkv_shape{c.s, c.b, c.np * 3 * kHn}, ctx_shape{c.s, c.b, c.np * kHn};
  const tensor::Shape probs_shape{c.b, c.np, c.s, c.s};
  auto qkv = random_halves<T>(static_cast<std::size_t>(qkv_shape.numel()), 7, -2.0f, 2.0f);
  auto dctx = random_halves<T>(static_cast<std::size_t>(ctx_shape.numel()), 8, -1.0f, 1.0f);
  const auto dqkv0 = random_halves<T>(qkv.size(), 9, -0.01f, 0.01f);

  // The host's 16-bit attention (the fp32 ops on widened inputs, each output rounded once).
  std::vector<float> probs(static_cast<std::size_t>(probs_shape.numel()));
  std::vector<float> dprobs(probs.size()), dropped(probs.size());
  std::vector<T> ctx(dctx.size()), dqkv = dqkv0;
  const auto t = [](auto& v, const tensor::Shape& shape) {
    return tensor::Tensor(
        v.data(), tensor::dtype_of<typename std::decay_t<decltype(v)>::value_type>(), shape);
  };
  const ops::HeadRange heads{c.first_head, c.stream_heads};
  ops::attention_probs_forward(t(probs, probs_shape), t(qkv, qkv_shape), c.coeff);
  if (c.p == 0.0f) {
    ops::attention_context_forward(t(ctx, ctx_shape), t(probs, probs_shape), t(qkv, qkv_shape));
    ops::attention_context_backward(t(dprobs, probs_shape), t(dqkv, qkv_shape), t(dctx, ctx_shape),
                                    t(probs, probs_shape), t(qkv, qkv_shape));
  } else {
    ops::attention_context_forward_with_dropout(t(ctx, ctx_shape), t(dropped, probs_shape),
                                                t(probs, probs_shape), t(qkv, qkv_shape),
                                                dropout_of(c), heads);
    ops::attention_context_backward_with_dropout(
        t(dprobs, probs_shape), t(dqkv, qkv_shape), t(dropped, probs_shape), t(dctx, ctx_shape),
        t(probs, probs_shape), t(qkv, qkv_shape), dropout_of(c), heads);
  }
  ops::attention_probs_backward(t(dqkv, qkv_shape), t(dprobs, probs_shape), t(probs, probs_shape),
                                t(qkv, qkv_shape), c.coeff);

  const Results16<T> got = run_kernels16<kHn>(c, qkv, dctx, dqkv0);
  const std::size_t head = 3 * kHn;
  EXPECT_EQ(count_beyond_one_ulp(got.ctx, ctx, 0, kHn, kHn), 0u) << "ctx";
  EXPECT_EQ(count_beyond_one_ulp(got.dqkv, dqkv, 2 * kHn, kHn, head), 0u) << "dv";
  // dq and dk: the kernels' delta = dctx·ctx reads the 16-bit ctx (as FlashAttention-2 reads its
  // 16-bit output), while the host's softmax backward sums p·dp in fp32; the difference, up to a
  // 16-bit rounding of ctx in each term, survives the cancellation in dp − delta, so these are
  // bounded in norm by 2u (u the unit roundoff of T; measured below u).
  const double bound = std::is_same_v<T, tensor::BFloat16> ? 0x1p-8 : 0x1p-10;
  EXPECT_LE(relative_error16(got.dqkv, dqkv), bound) << "dq, dk";
  EXPECT_LE(relative_error(got.lse, reference_lse(widened(qkv), c, kHn)), 1e-6);
  // A fixed order: the same bits again.
  const Results16<T> again = run_kernels16<kHn>(c, qkv, dctx, dqkv0);
  EXPECT_EQ(bits(again.ctx), bits(got.ctx));
  EXPECT_EQ(again.lse, got.lse);
  EXPECT_EQ(bits(again.dqkv), bits(got.dqkv));
}

TEST(KernelsEmulatedAttention, Bf16StorageMatchesHost16BitOps) {
  check_16bit_against_host<8, tensor::BFloat16>({1, 1, 1, 8, 1.0f});
  check_16bit_against_host<8, tensor::BFloat16>({33, 2, 2, 8, 2.0f});
  check_16bit_against_host<64, tensor::BFloat16>({33, 1, 2, 64, 1.0f});
  check_16bit_against_host<16, tensor::BFloat16>({70, 1, 2, 16, 2.0f, 0.5f, 1, 4});
}

TEST(KernelsEmulatedAttention, Fp16StorageMatchesHost16BitOps) {
  check_16bit_against_host<8, tensor::Float16>({33, 2, 2, 8, 2.0f});
  check_16bit_against_host<64, tensor::Float16>({33, 1, 2, 64, 1.0f, 0.1f});
}

}  // namespace
}  // namespace mds
