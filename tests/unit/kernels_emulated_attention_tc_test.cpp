// The tensor-core flash attention's device code (kernels/attention_tc_kernels.cuh) run on the CPU
// under the SIMT emulation with emulated mma/ldmatrix/cp.async (tests/unit/simt_mma_emulation.h),
// against the host's 16-bit attention (ops::attention_* on bf16/fp16 host tensors: the fp32 ops
// on the widened inputs, each output rounded once). Every output must lie within the elementwise
// bounds of attention_tc_bounds.h (P and dS rounded to 16 bits before their products); lse within
// 1e-6 of its definition in double; reruns bit-identical; the lse of either kernel family serves
// the other's backward. Outputs start poisoned (0xFFFF, NaN in both types; lse NaN; shared memory
// 0xFF bytes before each block). Each case prints the largest error as a share of its bound and
// the normwise relative error. tests/gpu/attention_tc_test.cpp runs the same comparison on a
// device.
#include "tests/unit/simt_mma_emulation.h"

namespace mds::kernels::attention_detail {
// The SIMT kernels' shared array; kernels_emulated_attention_test.cpp runs the same kernels and
// defines the same inline variable.
inline float smem[simt::kSharedFloats];
}  // namespace mds::kernels::attention_detail

namespace mds::kernels::attention_tc_detail {
alignas(16) unsigned char smem[1 << 17];
}

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/attention_keep_bits.cuh"
#include "kernels/attention_kernels.cuh"
#include "kernels/attention_tc_draw.cuh"
#include "kernels/attention_tc_kernels.cuh"
#include "model/alibi.h"
#include "ops/attention.h"
#include "tensor/tensor.h"
#include "tests/unit/attention_keep_bits_oracle.h"
#include "tests/unit/attention_tc_bounds.h"
#include "tests/unit/emulated_storage.h"

namespace mds {
namespace {

namespace ad = kernels::attention_detail;
namespace tc = kernels::attention_tc_detail;
using emulated::bits;
using emulated::HostBits16Io;
using emulated::widened;

// Under AddressSanitizer (the test command's second build) the emulation runs several times
// slower: the largest tests take their smaller cases there (out-of-bounds accesses show at any
// size with a partial tile), the release build all of them.
#if defined(MDS_SIMT_ASAN)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

struct Case {
  std::int64_t s, b, np;
  float coeff;
  // Attention dropout (p = 0: none) and the heads of the layer these np are (0: np).
  float p = 0.0f;
  std::int64_t first_head = 0, stream_heads = 0;
  bool alibi = false;  // ALiBi's key bias (model/alibi.h) of these heads of the layer
};

template <typename T>
using MmaType =
    std::conditional_t<std::is_same_v<T, tensor::BFloat16>, kernels::mma::Bf16, kernels::mma::Fp16>;

template <typename T>
const char* type_name() {
  return std::is_same_v<T, tensor::BFloat16> ? "bf16" : "fp16";
}

ops::DropoutStream dropout_of(const Case& c) {
  return {c.p, 0x5EEDull, 77};
}

// The ALiBi key bias of a case's heads ([np, s], rounded to T as a T run's params hold it), or an
// empty vector.
template <typename T>
std::vector<float> key_bias_of(const Case& c) {
  if (!c.alibi) return {};
  const std::int64_t layer_heads = c.stream_heads > 0 ? c.stream_heads : c.np;
  return model::alibi_key_bias(layer_heads, c.first_head, c.np, c.s, tensor::dtype_of<T>());
}

// As kernels/attention.cu's launch_of; bias: key_bias_of's (empty: none).
ad::Geometry geometry_of(const Case& c, std::int64_t hn, const std::vector<float>& bias = {}) {
  ad::Geometry g{c.s, c.b * c.np * 3 * hn, c.b * c.np * hn};
  g.key_bias = bias.empty() ? nullptr : bias.data();
  const ops::DropoutStream stream = dropout_of(c);
  g.dropout.p = stream.p;
  g.dropout.scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(stream.p)));
  g.dropout.seed = stream.seed;
  g.dropout.offset = stream.offset;
  g.dropout.np = c.np;
  g.dropout.first_head = c.first_head;
  g.dropout.stream_heads = c.stream_heads > 0 ? c.stream_heads : c.np;
  return g;
}

float alpha_of(std::int64_t hn, float coeff) {
  return static_cast<float>(1.0 / (std::sqrt(static_cast<double>(hn)) * coeff));
}

unsigned grid_x(const Case& c) {
  return static_cast<unsigned>(c.b * c.np);
}

unsigned tiles(const Case& c, std::int64_t rows) {
  return static_cast<unsigned>((c.s + rows - 1) / rows);
}

// Before each block: shared memory poisoned, and ldmatrix/cp.async confined to the bytes the
// launch gives the kernel.
std::function<void()> poison_tc_shared(std::size_t bytes) {
  return [bytes] {
    std::memset(tc::smem, 0xFF, sizeof(tc::smem));
    simt::mma_emulation::shared_window = {tc::smem, bytes};
  };
}

void poison_simt_shared() {
  for (float& x : ad::smem) x = NAN;
}

template <typename T>
const std::uint16_t* raw(const std::vector<T>& v) {
  return reinterpret_cast<const std::uint16_t*>(v.data());
}

template <typename T>
std::uint16_t* raw(std::vector<T>& v) {
  return reinterpret_cast<std::uint16_t*>(v.data());
}

template <typename T>
std::vector<T> random_halves(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = tensor::round_to<T>(dist(rng));
  return v;
}

template <typename T>
struct Forward {
  std::vector<T> ctx;
  std::vector<float> lse;
};

// ---- the kernels, emulated, as kernels/attention.cu and attention_tc.cu launch them -----------

// keep: the keep bits (Dropout::keep_bits) the forward keeps and the backward reads, or null.
// As attention_tc.cu: with dropout and s % 8 == 0 draw_keep_bits_kernel draws them and the
// forward reads them, unless !draw_first (then, as for other s, the forward draws and stores them).
template <int kHn, typename T, int kAtoms = 1>
Forward<T> forward_tc(const Case& c, const std::vector<T>& qkv, std::uint32_t* keep = nullptr,
                      bool draw_first = true) {
  Forward<T> r{std::vector<T>(static_cast<std::size_t>(c.s * c.b * c.np * kHn), T{0xFFFF}),
               std::vector<float>(static_cast<std::size_t>(c.b * c.np * c.s), NAN)};
  const std::vector<float> bias = key_bias_of<T>(c);
  ad::Geometry g = geometry_of(c, kHn, bias);
  g.dropout.keep_bits = keep;
  const float alpha = alpha_of(kHn, c.coeff);
  const bool read_bits = draw_first && keep != nullptr && c.p > 0.0f && c.s % 8 == 0;
  if (read_bits) {
    const tc::KeepBitsLaunch shape = tc::keep_bits_draw_launch(c.b * c.np, c.s);
    simt::launch(
        shape.groups, shape.slices, shape.threads, [&] { tc::draw_keep_bits_kernel(g); }, [] {});
  }
  simt::launch(
      grid_x(c), tiles(c, tc::kAtomBlockRows<kAtoms>), tc::kThreads,
      [&] {
        if (read_bits) {
          tc::forward_kernel<MmaType<T>, kHn, true, kAtoms>(raw(r.ctx), r.lse.data(), raw(qkv), g,
                                                            alpha, c.coeff);
        } else {
          tc::forward_kernel<MmaType<T>, kHn, false, kAtoms>(raw(r.ctx), r.lse.data(), raw(qkv), g,
                                                             alpha, c.coeff);
        }
      },
      poison_tc_shared(tc::kForwardSharedBytes<kHn, kAtoms>));
  return r;
}

// As attention_tc.cu: row_delta_kernel, dkdv_kernel storing dSᵀ, dq_from_ds_kernel; or, with
// !from_ds, dq_kernel (which stores the deltas) then dkdv_kernel; with kTrial (hn = 64) in the
// launch shapes of AttentionKernel::kTensorCoreTrialShapes: dkdv_kernel stepping over 32 query
// rows and dq_from_ds_kernel with two atoms a warp.
template <int kHn, typename T, bool kTrial = false>
std::vector<T> backward_tc(const Case& c, const std::vector<T>& qkv, const std::vector<T>& dctx,
                           const Forward<T>& f, std::vector<T> dqkv, bool accumulate = true,
                           std::uint32_t* keep = nullptr, bool from_ds = true) {
  static_assert(!kTrial || kHn == 64, "the trial shapes are hn = 64's");
  constexpr int kDkdvStep = kTrial ? 32 : tc::kBackwardStep<kHn>;
  constexpr int kDqAtoms = kTrial ? 2 : 1;
  const std::vector<float> bias = key_bias_of<T>(c);
  ad::Geometry g = geometry_of(c, kHn, bias);
  g.dropout.keep_bits = keep;
  const float alpha = alpha_of(kHn, c.coeff);
  // The deltas and the stored dSᵀ start poisoned: a row or pair left out shows.
  std::vector<float> delta(static_cast<std::size_t>(c.b * c.np * c.s), NAN);
  const std::int64_t ds_ld = tc::stored_ds_ld(c.s);
  std::vector<std::uint16_t> ds(static_cast<std::size_t>(c.b * c.np * c.s * ds_ld), 0x7FC1);
  const auto dkdv = [&]<bool kStoreDs>() {
    simt::launch(
        grid_x(c), tiles(c, tc::kBlockRows), tc::kThreads,
        [&] {
          tc::dkdv_kernel<MmaType<T>, kHn, kStoreDs, kDkdvStep>(
              raw(dqkv), raw(dctx), f.lse.data(), delta.data(), raw(qkv), g, alpha, c.coeff,
              accumulate, ds.data(), ds_ld);
        },
        poison_tc_shared(tc::kDkdvSharedBytes<kHn, kDkdvStep>));
  };
  if (from_ds) {
    simt::launch(
        grid_x(c), tiles(c, tc::kBlockRows), tc::kThreads,
        [&] {
          tc::row_delta_kernel<MmaType<T>, kHn>(delta.data(), raw(dctx), raw(f.ctx), f.lse.data(),
                                                g);
        },
        poison_tc_shared(tc::kRowDeltaSharedBytes<kHn>));
    for (const float d : delta) EXPECT_FALSE(std::isnan(d)) << "a row's delta not stored";
    dkdv.template operator()<true>();
    simt::launch(
        grid_x(c), tiles(c, tc::kAtomBlockRows<kDqAtoms>), tc::kThreads,
        [&] {
          tc::dq_from_ds_kernel<MmaType<T>, kHn, kDqAtoms>(raw(dqkv), ds.data(), ds_ld, raw(qkv), g,
                                                           alpha, c.coeff, accumulate);
        },
        poison_tc_shared(tc::kDqFromDsSharedBytes<kHn, kDqAtoms>));
    return dqkv;
  }
  simt::launch(
      grid_x(c), tiles(c, tc::kBlockRows), tc::kThreads,
      [&] {
        tc::dq_kernel<MmaType<T>, kHn>(raw(dqkv), delta.data(), raw(dctx), raw(f.ctx), f.lse.data(),
                                       raw(qkv), g, alpha, c.coeff, accumulate);
      },
      poison_tc_shared(tc::kBackwardSharedBytes<kHn>));
  for (const float d : delta) EXPECT_FALSE(std::isnan(d)) << "a row's delta not stored";
  dkdv.template operator()<false>();
  return dqkv;
}

template <int kHn, typename T>
Forward<T> forward_simt(const Case& c, const std::vector<T>& qkv) {
  using Io = HostBits16Io<T>;
  Forward<T> r{std::vector<T>(static_cast<std::size_t>(c.s * c.b * c.np * kHn), T{0xFFFF}),
               std::vector<float>(static_cast<std::size_t>(c.b * c.np * c.s), NAN)};
  const std::vector<float> bias = key_bias_of<T>(c);
  const ad::Geometry g = geometry_of(c, kHn, bias);
  const float alpha = alpha_of(kHn, c.coeff);
  simt::launch(
      grid_x(c), tiles(c, ad::kTile),
      [&] {
        ad::forward_kernel<kHn, Io>(r.ctx.data(), r.lse.data(), qkv.data(), g, alpha, c.coeff);
      },
      poison_simt_shared);
  return r;
}

template <int kHn, typename T>
std::vector<T> backward_simt(const Case& c, const std::vector<T>& qkv, const std::vector<T>& dctx,
                             const Forward<T>& f, std::vector<T> dqkv) {
  using Io = HostBits16Io<T>;
  const std::vector<float> bias = key_bias_of<T>(c);
  const ad::Geometry g = geometry_of(c, kHn, bias);
  const float alpha = alpha_of(kHn, c.coeff);
  simt::launch(
      grid_x(c), tiles(c, ad::kTile),
      [&] {
        ad::dkdv_kernel<kHn, Io>(dqkv.data(), dctx.data(), f.ctx.data(), f.lse.data(), qkv.data(),
                                 g, alpha, c.coeff);
      },
      poison_simt_shared);
  simt::launch(
      grid_x(c), tiles(c, ad::kTile),
      [&] {
        ad::dq_kernel<kHn, Io>(dqkv.data(), dctx.data(), f.ctx.data(), f.lse.data(), qkv.data(), g,
                               alpha, c.coeff);
      },
      poison_simt_shared);
  return dqkv;
}

// ---- the host reference and the comparisons ----------------------------------------------------

template <typename T>
struct Host {
  std::vector<T> ctx, dqkv;
  std::vector<float> probs, dropped;  // dropped = probs without dropout
};

template <int kHn, typename T>
Host<T> host_attention(const Case& c, std::vector<T> qkv, std::vector<T> dctx,
                       std::vector<T> dqkv) {
  const tensor::Shape qkv_shape{c.s, c.b, c.np * 3 * kHn}, ctx_shape{c.s, c.b, c.np * kHn};
  const tensor::Shape probs_shape{c.b, c.np, c.s, c.s};
  Host<T> h{std::vector<T>(dctx.size()),
            std::move(dqkv),
            std::vector<float>(static_cast<std::size_t>(probs_shape.numel())),
            {}};
  std::vector<float> dprobs(h.probs.size());
  const auto t = [](auto& v, const tensor::Shape& shape) {
    return tensor::Tensor(
        v.data(), tensor::dtype_of<typename std::decay_t<decltype(v)>::value_type>(), shape);
  };
  std::vector<float> bias = key_bias_of<T>(c);
  ops::attention_probs_forward(t(h.probs, probs_shape), t(qkv, qkv_shape), c.coeff,
                               bias.empty() ? tensor::Tensor{} : t(bias, {c.np, c.s}));
  if (c.p == 0.0f) {
    h.dropped = h.probs;
    ops::attention_context_forward(t(h.ctx, ctx_shape), t(h.probs, probs_shape), t(qkv, qkv_shape));
    ops::attention_context_backward(t(dprobs, probs_shape), t(h.dqkv, qkv_shape),
                                    t(dctx, ctx_shape), t(h.probs, probs_shape), t(qkv, qkv_shape));
  } else {
    h.dropped.resize(h.probs.size());
    const ops::HeadRange heads{c.first_head, c.stream_heads};
    ops::attention_context_forward_with_dropout(t(h.ctx, ctx_shape), t(h.dropped, probs_shape),
                                                t(h.probs, probs_shape), t(qkv, qkv_shape),
                                                dropout_of(c), heads);
    ops::attention_context_backward_with_dropout(
        t(dprobs, probs_shape), t(h.dqkv, qkv_shape), t(h.dropped, probs_shape), t(dctx, ctx_shape),
        t(h.probs, probs_shape), t(qkv, qkv_shape), dropout_of(c), heads);
  }
  ops::attention_probs_backward(t(h.dqkv, qkv_shape), t(dprobs, probs_shape),
                                t(h.probs, probs_shape), t(qkv, qkv_shape), c.coeff);
  return h;
}

// log Σ_{j ≤ i} exp(z_ij) of every (batch, head, query) row in double, z = coeff·α·q·k plus the
// ALiBi bias of key j (bias: [np, s], or empty).
std::vector<float> reference_lse(const std::vector<float>& qkv, const Case& c, std::int64_t hn,
                                 const std::vector<float>& bias) {
  const double alpha = 1.0 / (std::sqrt(static_cast<double>(hn)) * c.coeff);
  const std::int64_t ld = c.b * c.np * 3 * hn;
  std::vector<float> lse(static_cast<std::size_t>(c.b * c.np * c.s));
  for (std::int64_t bh = 0; bh < c.b * c.np; ++bh) {
    for (std::int64_t i = 0; i < c.s; ++i) {
      std::vector<double> z;
      double max = -INFINITY, sum = 0.0;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0.0;
        for (std::int64_t d = 0; d < hn; ++d) {
          dot += static_cast<double>(qkv[static_cast<std::size_t>(i * ld + bh * 3 * hn + d)]) *
                 qkv[static_cast<std::size_t>(j * ld + bh * 3 * hn + hn + d)];
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

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

using attention_tc_test::measure;
using attention_tc_test::Measured;

void expect_within(const Measured& m, const char* what) {
  EXPECT_EQ(m.beyond, 0u) << what << ": elements beyond the bound (worst share " << m.worst_share
                          << ")";
}

// Which kernel family runs each half.
struct Kernels {
  bool forward_tc = true, backward_tc = true;
};

template <int kHn, typename T>
void check_against_host(const Case& c, Kernels kernels = {}, bool rerun = false) {
  SCOPED_TRACE(testing::Message() << type_name<T>() << " s=" << c.s << " b=" << c.b
                                  << " np=" << c.np << " hn=" << kHn << " coeff=" << c.coeff
                                  << " p=" << c.p << " heads " << c.first_head << "/"
                                  << c.stream_heads << (c.alibi ? " alibi" : "") << " forward "
                                  << (kernels.forward_tc ? "tc" : "simt") << " backward "
                                  << (kernels.backward_tc ? "tc" : "simt"));
  const auto qkv_n = static_cast<std::size_t>(c.s * c.b * c.np * 3 * kHn);
  const auto qkv = random_halves<T>(qkv_n, 7, -2.0f, 2.0f);
  const auto dctx = random_halves<T>(qkv_n / 3, 8, -1.0f, 1.0f);
  const auto dqkv0 = random_halves<T>(qkv_n, 9, -0.01f, 0.01f);
  const Host<T> host = host_attention<kHn, T>(c, qkv, dctx, dqkv0);

  const std::vector<float> bias = key_bias_of<T>(c);
  const attention_tc_test::BoundInputs in = attention_tc_test::bound_inputs(
      c.s, c.b, c.np, kHn, c.coeff, qkv, dctx, host.ctx, host.probs, host.dropped, bias);
  const attention_tc_test::Bounds bounds = attention_tc_test::attention_bounds(in);

  const auto run_forward = [&] {
    return kernels.forward_tc ? forward_tc<kHn>(c, qkv) : forward_simt<kHn>(c, qkv);
  };
  const auto run_backward = [&](const Forward<T>& f) {
    return kernels.backward_tc ? backward_tc<kHn>(c, qkv, dctx, f, dqkv0)
                               : backward_simt<kHn>(c, qkv, dctx, f, dqkv0);
  };
  const Forward<T> f = run_forward();
  const std::vector<T> dqkv = run_backward(f);

  const double lse_error = relative_error(f.lse, reference_lse(widened(qkv), c, kHn, bias));
  EXPECT_LE(lse_error, 1e-6) << "lse";
  const std::size_t hn = kHn, head = 3 * kHn;
  const Measured ctx = measure(f.ctx, host.ctx, bounds.ctx, 0, hn, hn);
  const Measured dq = measure(dqkv, host.dqkv, bounds.dqkv, 0, hn, head);
  const Measured dk = measure(dqkv, host.dqkv, bounds.dqkv, hn, hn, head);
  const Measured dv = measure(dqkv, host.dqkv, bounds.dqkv, 2 * hn, hn, head);
  expect_within(ctx, "ctx");
  expect_within(dq, "dq");
  expect_within(dk, "dk");
  expect_within(dv, "dv");
  std::printf(
      "[ measured ] %s hn=%d s=%lld b=%lld np=%lld coeff=%g p=%g %s/%s: worst error/bound ctx "
      "%.3f dq %.3f dk %.3f dv %.3f; relative ctx %.2e dq %.2e dk %.2e dv %.2e; lse %.1e\n",
      type_name<T>(), kHn, static_cast<long long>(c.s), static_cast<long long>(c.b),
      static_cast<long long>(c.np), static_cast<double>(c.coeff), static_cast<double>(c.p),
      kernels.forward_tc ? "tc" : "simt", kernels.backward_tc ? "tc" : "simt", ctx.worst_share,
      dq.worst_share, dk.worst_share, dv.worst_share, ctx.relative, dq.relative, dk.relative,
      dv.relative, lse_error);

  if (rerun) {  // a fixed order of operations: the same bits again
    const Forward<T> f2 = run_forward();
    EXPECT_EQ(bits(f2.ctx), bits(f.ctx));
    EXPECT_EQ(f2.lse, f.lse);
    EXPECT_EQ(bits(run_backward(f2)), bits(dqkv));
  }
}

// One token, a partial tile, several tiles with a partial last one (up to 150 rows), two batches
// and heads, coeff > 1; bit-identical reruns. Sizes stay small: the emulation runs a std::thread
// per CUDA thread (about 40 s for this file under ASan).
TEST(KernelsEmulatedAttentionTc, Bf16WithinBoundsOfHost16BitOps) {
  check_against_host<64, tensor::BFloat16>({1, 1, 1, 1.0f});
  check_against_host<64, tensor::BFloat16>({17, 2, 2, 2.0f}, {}, true);
  check_against_host<128, tensor::BFloat16>({67, 1, 1, 1.0f});
  check_against_host<64, tensor::BFloat16>({150, 1, 1, 1.0f});
}

TEST(KernelsEmulatedAttentionTc, Fp16WithinBoundsOfHost16BitOps) {
  check_against_host<128, tensor::Float16>({17, 1, 2, 1.0f});
  check_against_host<64, tensor::Float16>({97, 1, 1, 3.0f});
}

// Dropout inside: the masks of the CPU's halves, numbered by the heads of the whole layer; with
// s % 8 == 0 (the lanes sharing each Philox block, attention_tc_dropout.cuh) and without.
TEST(KernelsEmulatedAttentionTc, DropoutWithinBoundsOfHostMasks) {
  check_against_host<64, tensor::BFloat16>({72, 1, 2, 1.0f, 0.1f, 1, 4}, {}, true);
  check_against_host<64, tensor::BFloat16>({70, 1, 1, 1.0f, 0.1f, 2, 3});
  check_against_host<128, tensor::Float16>({40, 1, 1, 2.0f, 0.5f, 2, 3});
  check_against_host<128, tensor::Float16>({36, 1, 1, 2.0f, 0.5f, 2, 3});
  check_against_host<128, tensor::Float16>({33, 1, 1, 2.0f, 0.1f});
}

// ALiBi (BLOOM's slopes for the layer's heads, rounded to T): the key bias in score units joins
// every raw score of the forward and of both backward kernels (the dSᵀ stored for dq included),
// within the same bounds (|z| counts the bias) and the lse of the biased definition; coeff 1 and
// > 1, a TP shard's heads, dropout, the SIMT kernels' lse serving the tensor-core backward and
// the other way round.
TEST(KernelsEmulatedAttentionTc, AlibiKeyBiasWithinBoundsOfHost16BitOps) {
  check_against_host<64, tensor::BFloat16>({70, 2, 2, 1.0f, 0.0f, 0, 0, true}, {}, true);
  check_against_host<128, tensor::Float16>({67, 1, 2, 3.0f, 0.0f, 1, 4, true});
  check_against_host<64, tensor::Float16>({97, 1, 1, 2.0f, 0.1f, 2, 3, true});
  check_against_host<64, tensor::BFloat16>({70, 1, 2, 1.0f, 0.1f, 0, 0, true}, {true, false});
  check_against_host<64, tensor::BFloat16>({70, 1, 2, 1.0f, 0.1f, 0, 0, true}, {false, true});
}

// dqkv = … (accumulate false): from a NaN-poisoned dqkv, every element written, with the values of
// accumulating onto zeros (equal as numbers: a −0 may stay −0 where 0 + −0 gives +0).
template <int kHn>
void check_overwrite(const Case& c) {
  using T = tensor::BFloat16;
  SCOPED_TRACE(testing::Message() << "s=" << c.s << " hn=" << kHn << " p=" << c.p);
  const auto qkv_n = static_cast<std::size_t>(c.s * c.b * c.np * 3 * kHn);
  const auto qkv = random_halves<T>(qkv_n, 5, -2.0f, 2.0f);
  const auto dctx = random_halves<T>(qkv_n / 3, 6, -1.0f, 1.0f);
  const Forward<T> f = forward_tc<kHn>(c, qkv);
  const std::vector<T> onto_zeros = backward_tc<kHn>(c, qkv, dctx, f, std::vector<T>(qkv_n, T{0}));
  const std::vector<T> written =
      backward_tc<kHn>(c, qkv, dctx, f, std::vector<T>(qkv_n, T{0xFFFF}), false);
  EXPECT_EQ(widened(written), widened(onto_zeros));
}

TEST(KernelsEmulatedAttentionTc, OverwriteWritesEveryElementAsAccumulatingOntoZeros) {
  check_overwrite<64>({70, 1, 2, 1.0f, 0.1f});
  check_overwrite<128>({33, 2, 1, 2.0f});
}

// The lse of either forward serves either backward (both are fp32 and within 1e-6 of the
// definition): tensor-core forward with the SIMT backward and the other way round, same bounds.
TEST(KernelsEmulatedAttentionTc, LseInterchangeableWithSimtKernels) {
  check_against_host<64, tensor::BFloat16>({70, 1, 1, 1.0f, 0.1f}, {true, false});
  check_against_host<64, tensor::BFloat16>({70, 1, 1, 1.0f, 0.1f}, {false, true});
}

// cp.async copies landing at issue instead of at the wait (simt_mma_emulation.h): the same bits,
// so no tile is refilled while another warp still reads it.
TEST(KernelsEmulatedAttentionTc, SameBitsWhenCopiesLandEarly) {
  using T = tensor::BFloat16;
  const Case c{200, 1, 1, 1.0f, 0.1f};  // 4 key tiles: stages refilled while read
  const auto qkv = random_halves<T>(static_cast<std::size_t>(c.s * 3 * 64), 3, -2.0f, 2.0f);
  const auto dctx = random_halves<T>(static_cast<std::size_t>(c.s * 64), 4, -1.0f, 1.0f);
  const std::vector<T> dqkv0(qkv.size(), T{0});
  const Forward<T> late = forward_tc<64>(c, qkv);
  const std::vector<T> late_grad = backward_tc<64>(c, qkv, dctx, late, dqkv0);
  simt::mma_emulation::cp_async_immediate = true;
  const Forward<T> early = forward_tc<64>(c, qkv);
  const std::vector<T> early_grad = backward_tc<64>(c, qkv, dctx, early, dqkv0);
  simt::mma_emulation::cp_async_immediate = false;
  EXPECT_EQ(bits(early.ctx), bits(late.ctx));
  EXPECT_EQ(early.lse, late.lse);
  EXPECT_EQ(bits(early_grad), bits(late_grad));
}

// ---- keep bits ---------------------------------------------------------------------------------

std::vector<std::uint32_t> poisoned_keep(const Case& c) {
  return std::vector<std::uint32_t>(
      static_cast<std::size_t>(c.b * c.np * c.s * ad::keep_words(c.s)), 0xA5A5A5A5u);
}

// Every pair with key ≤ row has the host's decision in its bit.
void expect_host_keep_bits(const Case& c, const std::vector<std::uint32_t>& keep) {
  EXPECT_EQ(attention_keep_bits_test::differing_from_host(
                {c.s, c.b, c.np, c.first_head, c.stream_heads}, dropout_of(c), keep),
            0u)
      << "keep bits differing from the host's masks";
}

// A backward's qkv, dctx and the dqkv it starts from, seeded from `seed` on.
template <typename T>
struct BackwardInputs {
  std::vector<T> qkv, dctx, dqkv0;
};

template <int kHn, typename T>
BackwardInputs<T> backward_inputs(const Case& c, std::uint32_t seed) {
  const auto qkv_n = static_cast<std::size_t>(c.s * c.b * c.np * 3 * kHn);
  return {random_halves<T>(qkv_n, seed, -2.0f, 2.0f),
          random_halves<T>(qkv_n / 3, seed + 1, -1.0f, 1.0f),
          random_halves<T>(qkv_n, seed + 2, -0.01f, 0.01f)};
}

// How many words have bits set for keys past their row.
std::size_t words_set_above_the_diagonal(const Case& c, const std::vector<std::uint32_t>& keep) {
  const std::int64_t words = ad::keep_words(c.s);
  std::size_t set_above = 0;
  for (std::int64_t row = 0; row < c.b * c.np * c.s; ++row) {  // every slice's rows
    const std::int64_t i = row % c.s;
    for (std::int64_t w = 0; w < words; ++w) {
      const std::uint32_t above = w * 32 > i ? ~0u : w * 32 + 31 <= i ? 0u : ~0u << (i % 32 + 1);
      set_above += (keep[static_cast<std::size_t>(row * words + w)] & above) != 0;
    }
  }
  return set_above;
}

// The bits draw_keep_bits_kernel writes: none past a row in its diagonal word, and no word wholly
// past the diagonal (those keep the poison of poisoned_keep).
void expect_only_the_triangle_written(const Case& c, const std::vector<std::uint32_t>& keep) {
  const std::int64_t words = ad::keep_words(c.s);
  std::size_t set_past_the_row = 0, written_past_the_diagonal = 0;
  for (std::int64_t row = 0; row < c.b * c.np * c.s; ++row) {  // every slice's rows
    const std::int64_t i = row % c.s;
    for (std::int64_t w = 0; w < words; ++w) {
      const std::uint32_t word = keep[static_cast<std::size_t>(row * words + w)];
      if (w * 32 > i) {
        written_past_the_diagonal += word != 0xA5A5A5A5u;
      } else if (w * 32 + 31 > i) {
        set_past_the_row += (word & (~0u << (i % 32 + 1))) != 0;
      }
    }
  }
  EXPECT_EQ(set_past_the_row, 0u) << "diagonal words with bits past their row";
  EXPECT_EQ(written_past_the_diagonal, 0u) << "words past the diagonal written";
}

// The forward keeps the host's masks as keep bits without changing its own outputs, and the
// backward reading them gives the bits of the backward drawing the masks itself. Sizes: s % 8 == 0
// (the shared Philox draws; the bits drawn first, only the triangle written, and as the forward
// itself stores them) and not, partial tiles, several key tiles and words per row, heads numbered
// within a wider layer; hn = 128 steps the dq kernel over 32 keys.
template <int kHn>
void check_keep_bits(const Case& c) {
  using T = tensor::BFloat16;
  SCOPED_TRACE(testing::Message() << "s=" << c.s << " b=" << c.b << " np=" << c.np << " hn=" << kHn
                                  << " p=" << c.p);
  const auto [qkv, dctx, dqkv0] = backward_inputs<kHn, T>(c, 11);
  std::vector<std::uint32_t> keep = poisoned_keep(c);
  const Forward<T> drawn = forward_tc<kHn>(c, qkv);
  const Forward<T> kept = forward_tc<kHn>(c, qkv, keep.data());
  EXPECT_EQ(bits(kept.ctx), bits(drawn.ctx));
  EXPECT_EQ(kept.lse, drawn.lse);
  expect_host_keep_bits(c, keep);
  EXPECT_EQ(bits(backward_tc<kHn>(c, qkv, dctx, kept, dqkv0, true, keep.data())),
            bits(backward_tc<kHn>(c, qkv, dctx, drawn, dqkv0)));
  EXPECT_EQ(bits(backward_tc<kHn>(c, qkv, dctx, kept, dqkv0, false, keep.data())),
            bits(backward_tc<kHn>(c, qkv, dctx, drawn, dqkv0, false)));
  if (c.s % 8 != 0) return;
  expect_only_the_triangle_written(c, keep);
  std::vector<std::uint32_t> stored = poisoned_keep(c);
  const Forward<T> storing = forward_tc<kHn>(c, qkv, stored.data(), false);
  EXPECT_EQ(bits(storing.ctx), bits(drawn.ctx));
  EXPECT_EQ(storing.lse, drawn.lse);
  expect_host_keep_bits(c, stored);
}

TEST(KernelsEmulatedAttentionTc, KeepBitsAreTheHostMasksAndServeTheBackward) {
  check_keep_bits<64>({72, 1, 2, 1.0f, 0.1f, 1, 4});
  check_keep_bits<128>({70, 2, 1, 1.0f, 0.1f, 2, 3});
  if (kSanitized) return;  // with the two below: 134 s in the sanitizer build at -O0, 25 at -O1
  check_keep_bits<64>({150, 1, 1, 2.0f, 0.5f});
  check_keep_bits<128>({132, 1, 2, 1.0f, 0.3f, 1, 3});
}

// draw_keep_bits_kernel's blocks of keep_bits_draw_launch and narrower ones of one warp (block
// edges falling elsewhere in the triangle, across rows and bands) give the host's masks alike.
TEST(KernelsEmulatedAttentionTc, DrawnKeepBitsDoNotDependOnTheBlockWidth) {
  const Case c{1104, 1, 2, 1.0f, 0.2f, 1, 3};
  ad::Geometry g = geometry_of(c, 64);
  const tc::KeepBitsLaunch shape = tc::keep_bits_draw_launch(c.b * c.np, c.s);
  ASSERT_EQ(shape.threads, 256u);
  ASSERT_TRUE(shape.fits);
  std::vector<std::uint32_t> wide = poisoned_keep(c), narrow = poisoned_keep(c);
  for (auto [keep, threads] : {std::pair{&wide, shape.threads}, std::pair{&narrow, 32u}}) {
    g.dropout.keep_bits = keep->data();
    simt::launch(
        tc::triangle_groups(c.s, threads), static_cast<unsigned>(c.b * c.np), threads,
        [&] { tc::draw_keep_bits_kernel(g); }, [] {});
  }
  EXPECT_EQ(wide, narrow);
  expect_host_keep_bits(c, narrow);
  expect_only_the_triangle_written(c, narrow);
}

// The triangle's words in order are every (row, word ≤ row / 32) of the bands' rows once, row by
// row; far into a long sequence's triangle too, where the band comes from a square root in fp32.
TEST(KernelsEmulatedAttentionTc, TriangleWordsNumberTheCausalWordsRowByRow) {
  for (const std::int64_t s : {4, 32, 36, 100, 1024}) {
    std::uint32_t u = 0;
    for (std::uint32_t row = 0; row < 32 * tc::keep_bands(s); ++row) {
      for (std::uint32_t word = 0; word <= row / 32; ++word, ++u) {
        const tc::TriangleWord at = tc::triangle_word(u);
        ASSERT_EQ(at.row, row) << "s " << s << ", word " << u;
        ASSERT_EQ(at.word, word) << "s " << s << ", word " << u;
      }
    }
    EXPECT_EQ(u, tc::triangle_words(s)) << "s " << s;
  }
  const std::int64_t s = 300000;
  ASSERT_TRUE(tc::keep_bits_draw_launch(1, s).fits);
  for (std::uint32_t b = 1; b < tc::keep_bands(s); b += 997) {
    const std::uint32_t first = 16 * b * (b + 1);
    EXPECT_EQ(tc::triangle_word(first).row, 32 * b);
    EXPECT_EQ(tc::triangle_word(first).word, 0u);
    EXPECT_EQ(tc::triangle_word(first - 1).row, 32 * b - 1);
    EXPECT_EQ(tc::triangle_word(first - 1).word, b - 1);
  }
  EXPECT_FALSE(tc::keep_bits_draw_launch(1, 600000).fits);
  EXPECT_FALSE(tc::keep_bits_draw_launch(65536, 1024).fits);
  EXPECT_TRUE(tc::keep_bits_draw_launch(65535, 1024).fits);
}

// After the SIMT forward, which keeps no bits, kernels/attention.cu runs keep_bits_kernel: the
// host's masks too (zeros above the diagonal), read the same way by the tensor-core backward.
TEST(KernelsEmulatedAttentionTc, SimtKeepBitsKernelWritesTheHostMasks) {
  using T = tensor::BFloat16;
  const Case c{97, 2, 1, 1.0f, 0.1f, 1, 2};
  std::vector<std::uint32_t> keep = poisoned_keep(c);
  ad::Geometry g = geometry_of(c, 64);
  g.dropout.keep_bits = keep.data();
  simt::launch(
      grid_x(c), tiles(c, ad::kTile), [&] { ad::keep_bits_kernel(g); }, [] {});
  expect_host_keep_bits(c, keep);
  EXPECT_EQ(words_set_above_the_diagonal(c, keep), 0u);
  const auto qkv =
      random_halves<T>(static_cast<std::size_t>(c.s * c.b * c.np * 3 * 64), 14, -2.0f, 2.0f);
  const auto dctx = random_halves<T>(qkv.size() / 3, 15, -1.0f, 1.0f);
  const std::vector<T> dqkv0(qkv.size(), T{0});
  const Forward<T> f = forward_simt<64>(c, qkv);
  EXPECT_EQ(bits(backward_tc<64>(c, qkv, dctx, f, dqkv0, true, keep.data())),
            bits(backward_tc<64>(c, qkv, dctx, f, dqkv0)));
}

// dq from the dSᵀ that dkdv_kernel stored (dq_from_ds_kernel) against dq_kernel computing dS
// itself: the same dqkv bits, accumulated and written, without dropout, with it drawn and from
// keep bits; partial tiles, an odd s, several key tiles, both head dims and element types.
template <int kHn, typename T>
void check_dq_from_ds(const Case& c) {
  SCOPED_TRACE(testing::Message() << "s=" << c.s << " b=" << c.b << " np=" << c.np << " hn=" << kHn
                                  << " p=" << c.p);
  const auto [qkv, dctx, dqkv0] = backward_inputs<kHn, T>(c, 21);
  std::vector<std::uint32_t> keep = poisoned_keep(c);
  for (std::uint32_t* bits_or_null : {static_cast<std::uint32_t*>(nullptr), keep.data()}) {
    if (bits_or_null != nullptr && c.p == 0.0f) continue;
    const Forward<T> f = forward_tc<kHn>(c, qkv, bits_or_null);
    for (const bool accumulate : {true, false}) {
      EXPECT_EQ(bits(backward_tc<kHn>(c, qkv, dctx, f, dqkv0, accumulate, bits_or_null, true)),
                bits(backward_tc<kHn>(c, qkv, dctx, f, dqkv0, accumulate, bits_or_null, false)))
          << "accumulate " << accumulate << ", keep bits " << (bits_or_null != nullptr);
    }
  }
}

TEST(KernelsEmulatedAttentionTc, DqFromStoredDsIsDqKernelsBits) {
  check_dq_from_ds<64, tensor::BFloat16>({1, 1, 1, 1.0f});
  if (kSanitized) {  // with the three below: 169 s in the sanitizer build at -O0, 34 at -O1
    check_dq_from_ds<64, tensor::BFloat16>({67, 1, 2, 1.0f, 0.1f, 1, 4});
    check_dq_from_ds<128, tensor::Float16>({72, 1, 1, 1.0f, 0.1f, 0, 0});
    return;
  }
  check_dq_from_ds<64, tensor::BFloat16>({131, 1, 2, 1.0f, 0.1f, 1, 4});
  check_dq_from_ds<128, tensor::BFloat16>({97, 1, 1, 2.0f, 0.2f});
  check_dq_from_ds<128, tensor::Float16>({72, 1, 1, 1.0f, 0.1f, 0, 0});
  check_dq_from_ds<64, tensor::BFloat16>({131, 2, 1, 2.0f, 0.1f, 1, 3, true});
}

// The launch shapes under trial at hn = 64 (AttentionKernel::kTensorCoreTrialShapes) against the
// defaults: forward_kernel with two m16 atoms a warp (blocks of 128 rows) gives the same ctx, lse
// and stored keep bits, drawing its masks (s % 8 ≠ 0) or reading drawn bits; dkdv_kernel stepping
// over 32 query rows instead of 64 runs the same products in the same order, and so does
// dq_from_ds_kernel with two atoms a warp: the same dqkv bits, accumulated and written, with and
// without dropout (the dq kernel recomputing dS keeps its one shape).
void check_trial_shapes(const Case& c) {
  SCOPED_TRACE(testing::Message() << "s=" << c.s << " b=" << c.b << " np=" << c.np << " p=" << c.p);
  using T = tensor::BFloat16;
  const auto [qkv, dctx, dqkv0] = backward_inputs<64, T>(c, 23);
  std::vector<std::uint32_t> keep = poisoned_keep(c);
  for (std::uint32_t* bits_or_null : {static_cast<std::uint32_t*>(nullptr), keep.data()}) {
    if (bits_or_null != nullptr && c.p == 0.0f) continue;
    std::vector<std::uint32_t> trial_keep = poisoned_keep(c);
    const Forward<T> trial =
        forward_tc<64, T, 2>(c, qkv, bits_or_null != nullptr ? trial_keep.data() : nullptr);
    const Forward<T> f = forward_tc<64>(c, qkv, bits_or_null);
    EXPECT_EQ(bits(trial.ctx), bits(f.ctx));
    EXPECT_EQ(trial.lse, f.lse);
    if (bits_or_null != nullptr) {
      EXPECT_EQ(trial_keep, keep);
    }
    for (const bool accumulate : {true, false}) {
      for (const bool from_ds : {true, false}) {
        EXPECT_EQ(
            bits(backward_tc<64, T, true>(c, qkv, dctx, f, dqkv0, accumulate, bits_or_null,
                                          from_ds)),
            bits(backward_tc<64, T>(c, qkv, dctx, f, dqkv0, accumulate, bits_or_null, from_ds)))
            << "accumulate " << accumulate << ", keep bits " << (bits_or_null != nullptr)
            << ", dq from dS " << from_ds;
      }
    }
  }
}

TEST(KernelsEmulatedAttentionTc, TrialShapesGiveTheSameBits) {
  static_assert(tc::kBackwardStep<64> == 64, "the default step the short one is checked against");
  check_trial_shapes({1, 1, 1, 1.0f});
  check_trial_shapes({65, 1, 1, 2.0f, 0.1f});  // two atoms, the second one row; drawn in the kernel
  check_trial_shapes({kSanitized ? 67 : 131, 1, 2, 1.0f, 0.1f, 1, 4});
  if (!kSanitized) check_trial_shapes({200, 2, 1, 1.0f, 0.1f});  // 200 % 8 = 0: drawn first
  check_trial_shapes({kSanitized ? 67 : 131, 2, 1, 2.0f, 0.1f, 0, 0, true});  // ALiBi
}

}  // namespace
}  // namespace mds
