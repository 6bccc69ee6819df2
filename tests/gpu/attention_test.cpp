#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "ops/cpu/attention.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_floats;
using ops::cpu::AttentionDims;

struct Case {
  std::int64_t s, b, np, hn;
  float coeff;
};
// Every compiled head dim; sequence lengths below, at and across the 32-row tile (1, 31, 33,
// 257 …), several batches and heads (the strided qkv views), coeff > 1 (layer scaling).
const Case kCases[] = {{1, 1, 1, 8, 1.0f},     {7, 2, 3, 16, 1.0f},   {31, 3, 2, 8, 2.0f},
                       {33, 1, 2, 32, 1.0f},   {64, 2, 2, 64, 1.0f},  {100, 1, 3, 96, 3.0f},
                       {129, 2, 1, 128, 1.0f}, {257, 1, 2, 64, 1.0f}, {1024, 1, 1, 128, 1.0f}};

AttentionDims dims_of(const Case& c) {
  return {c.s, c.b, c.np, c.hn};
}
std::size_t qkv_size(const Case& c) {
  return static_cast<std::size_t>(c.s * c.b * c.np * 3 * c.hn);
}
std::size_t ctx_size(const Case& c) {
  return static_cast<std::size_t>(c.s * c.b * c.np * c.hn);
}
std::size_t rows_size(const Case& c) {
  return static_cast<std::size_t>(c.b * c.np * c.s);
}
std::size_t probs_size(const Case& c) {
  return static_cast<std::size_t>(c.b * c.np * c.s * c.s);
}

testing::Message describe(const Case& c) {
  return testing::Message() << "s=" << c.s << " b=" << c.b << " np=" << c.np << " hn=" << c.hn
                            << " coeff=" << c.coeff;
}

// lse of every (batch, head, query) row from the definition, in double: log Σ_{j ≤ i} exp(z_ij),
// z = coeff·α·q·k.
std::vector<float> reference_lse(const std::vector<float>& qkv, const Case& c) {
  const double alpha = 1.0 / (std::sqrt(static_cast<double>(c.hn)) * c.coeff);
  const std::int64_t ld = c.b * c.np * 3 * c.hn;
  std::vector<float> lse(rows_size(c));
  for (std::int64_t bh = 0; bh < c.b * c.np; ++bh) {
    for (std::int64_t i = 0; i < c.s; ++i) {
      std::vector<double> z(static_cast<std::size_t>(i + 1));
      double max = -INFINITY;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0.0;
        for (std::int64_t d = 0; d < c.hn; ++d) {
          dot += static_cast<double>(qkv[static_cast<std::size_t>(i * ld + bh * 3 * c.hn + d)]) *
                 qkv[static_cast<std::size_t>(j * ld + bh * 3 * c.hn + c.hn + d)];
        }
        z[static_cast<std::size_t>(j)] = c.coeff * alpha * dot;
        max = std::max(max, z[static_cast<std::size_t>(j)]);
      }
      double sum = 0.0;
      for (const double v : z) sum += std::exp(v - max);
      lse[static_cast<std::size_t>(bh * c.s + i)] = static_cast<float>(max + std::log(sum));
    }
  }
  return lse;
}

// The q, k or v part (t = 0, 1, 2) of a [s, b, np·3·hn] tensor.
std::vector<float> part(const std::vector<float>& qkv, const Case& c, std::int64_t t) {
  std::vector<float> out;
  out.reserve(ctx_size(c));
  for (std::int64_t row = 0; row < c.s * c.b * c.np; ++row) {
    for (std::int64_t d = 0; d < c.hn; ++d) {
      out.push_back(qkv[static_cast<std::size_t>((row * 3 + t) * c.hn + d)]);
    }
  }
  return out;
}

// The CPU twin's context and qkv gradient (from zeros) for dctx, with an optional key bias.
struct CpuReference {
  std::vector<float> ctx, dqkv;
};
CpuReference cpu_reference(const std::vector<float>& qkv, const std::vector<float>& dctx,
                           const Case& c, const float* key_bias = nullptr) {
  const AttentionDims d = dims_of(c);
  std::vector<float> probs(probs_size(c)), dprobs(probs_size(c));
  CpuReference ref{std::vector<float>(ctx_size(c)), std::vector<float>(qkv_size(c), 0.0f)};
  ops::cpu::attention_probs_forward(probs.data(), qkv.data(), d, c.coeff, key_bias);
  ops::cpu::attention_context_forward(ref.ctx.data(), probs.data(), qkv.data(), d);
  ops::cpu::attention_context_backward(dprobs.data(), ref.dqkv.data(), dctx.data(), probs.data(),
                                       qkv.data(), d);
  ops::cpu::attention_probs_backward(ref.dqkv.data(), dprobs.data(), probs.data(), qkv.data(), d,
                                     c.coeff);
  return ref;
}

TEST(GpuAttention, ForwardMatchesCpuAndRepeats) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    const AttentionDims d = dims_of(c);
    const auto qkv = random_floats(qkv_size(c), 70, -2.0f, 2.0f);
    std::vector<float> probs(probs_size(c)), ref(ctx_size(c));
    ops::cpu::attention_probs_forward(probs.data(), qkv.data(), d, c.coeff);
    ops::cpu::attention_context_forward(ref.data(), probs.data(), qkv.data(), d);
    const auto ref_lse = reference_lse(qkv, c);

    DeviceArray<float> dqkv(qkv), ctx(ctx_size(c)), lse(rows_size(c));
    kernels::attention_forward(ctx.get(), lse.get(), dqkv.get(), d, c.coeff, {}, nullptr);
    const auto got = ctx.download(), got_lse = lse.download();
    // Online softmax and another summation order than the CPU's GEMMs: fp32 rounding only.
    MDS_EXPECT_CLOSE(got, ref, 1e-5);
    MDS_EXPECT_CLOSE(got_lse, ref_lse, 1e-6);
    // No atomics, a fixed order: the same bits again.
    DeviceArray<float> ctx2(ctx_size(c)), lse2(rows_size(c));
    kernels::attention_forward(ctx2.get(), lse2.get(), dqkv.get(), d, c.coeff, {}, nullptr);
    EXPECT_EQ(ctx2.download(), got);
    EXPECT_EQ(lse2.download(), got_lse);
  }
}

TEST(GpuAttention, BackwardMatchesCpuAndRepeats) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    const AttentionDims d = dims_of(c);
    const auto qkv = random_floats(qkv_size(c), 71, -2.0f, 2.0f);
    const auto dctx = random_floats(ctx_size(c), 72);
    const std::vector<float> ref = cpu_reference(qkv, dctx, c).dqkv;

    DeviceArray<float> dqkv_in(qkv), dctx_dev(dctx), ctx_dev(ctx_size(c)), lse(rows_size(c));
    kernels::attention_forward(ctx_dev.get(), lse.get(), dqkv_in.get(), d, c.coeff, {}, nullptr);
    // From zeros, so the bound measures the gradient itself, part by part.
    DeviceArray<float> grad(std::vector<float>(qkv_size(c), 0.0f));
    kernels::attention_backward(grad.get(), dctx_dev.get(), ctx_dev.get(), lse.get(), dqkv_in.get(),
                                d, c.coeff, {}, nullptr);
    const auto got = grad.download();
    // dq and dk go through dp − delta, a difference: a looser bound than dv's.
    MDS_EXPECT_CLOSE(part(got, c, 0), part(ref, c, 0), 2e-5);
    MDS_EXPECT_CLOSE(part(got, c, 1), part(ref, c, 1), 2e-5);
    MDS_EXPECT_CLOSE(part(got, c, 2), part(ref, c, 2), 1e-5);
    // Deterministic: the same bits again.
    DeviceArray<float> again(std::vector<float>(qkv_size(c), 0.0f));
    kernels::attention_backward(again.get(), dctx_dev.get(), ctx_dev.get(), lse.get(),
                                dqkv_in.get(), d, c.coeff, {}, nullptr);
    EXPECT_EQ(again.download(), got);
    // Accumulates: from other values, the result is those values plus the gradient.
    const auto initial = random_floats(qkv_size(c), 73);
    std::vector<float> expected(qkv_size(c));
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = initial[i] + got[i];
    DeviceArray<float> accumulated(initial);
    kernels::attention_backward(accumulated.get(), dctx_dev.get(), ctx_dev.get(), lse.get(),
                                dqkv_in.get(), d, c.coeff, {}, nullptr);
    EXPECT_EQ(accumulated.download(), expected);
  }
}

// ALiBi: a key bias [np, s] (slopes 2^-(h+1), as for 8 heads) joins the scores over coeff, forward
// and backward, as the CPU's attention_probs_forward adds it (fp32: the SIMT kernels; the
// tensor-core ones with a bias: attention_tc_test.cpp).
TEST(GpuAttention, AlibiKeyBiasMatchesCpu) {
  const Case c{100, 2, 4, 64, 2.0f};
  SCOPED_TRACE(describe(c));
  const AttentionDims d = dims_of(c);
  std::vector<float> bias(static_cast<std::size_t>(c.np * c.s));
  for (std::int64_t h = 0; h < c.np; ++h) {
    for (std::int64_t j = 0; j < c.s; ++j) {
      bias[static_cast<std::size_t>(h * c.s + j)] =
          std::ldexp(1.0f, -static_cast<int>(h + 1)) * static_cast<float>(j);
    }
  }
  const auto qkv = random_floats(qkv_size(c), 74, -2.0f, 2.0f);
  const auto dctx = random_floats(ctx_size(c), 75);
  const CpuReference cpu = cpu_reference(qkv, dctx, c, bias.data());
  const std::vector<float>& ctx = cpu.ctx;
  const std::vector<float>& ref = cpu.dqkv;

  DeviceArray<float> dqkv_in(qkv), dctx_dev(dctx), ctx_dev(ctx_size(c)), lse(rows_size(c)),
      dbias(bias), grad(std::vector<float>(qkv_size(c), 0.0f));
  kernels::attention_forward(ctx_dev.get(), lse.get(), dqkv_in.get(), tensor::DType::kFloat32, d,
                             c.coeff, {}, nullptr, kernels::AttentionKernel::kAuto, nullptr,
                             nullptr, dbias.get());
  kernels::attention_backward(grad.get(), dctx_dev.get(), ctx_dev.get(), lse.get(), dqkv_in.get(),
                              tensor::DType::kFloat32, d, c.coeff, {}, nullptr,
                              kernels::AttentionKernel::kAuto, true, nullptr, nullptr, nullptr,
                              dbias.get());
  MDS_EXPECT_CLOSE(ctx_dev.download(), ctx, 1e-5);
  const auto got = grad.download();
  MDS_EXPECT_CLOSE(part(got, c, 0), part(ref, c, 0), 2e-5);
  MDS_EXPECT_CLOSE(part(got, c, 1), part(ref, c, 1), 2e-5);
  MDS_EXPECT_CLOSE(part(got, c, 2), part(ref, c, 2), 1e-5);
}

TEST(GpuAttention, RejectsHeadDimsWithoutAKernel) {
  const Case c{4, 1, 1, 24, 1.0f};
  EXPECT_FALSE(kernels::attention_head_dim_supported(24));
  DeviceArray<float> qkv(qkv_size(c)), ctx(ctx_size(c)), lse(rows_size(c));
  EXPECT_THROW(
      kernels::attention_forward(ctx.get(), lse.get(), qkv.get(), dims_of(c), 1.0f, {}, nullptr),
      base::Error);
}

}  // namespace
}  // namespace mds
