// The public ops (ops/*.h) on CUDA tensors with a CUDA DeviceContext against the same ops on host
// tensors: the dispatch and the ops/cuda layer (argument unpacking, the context's stream and
// cuBLASLt handle, the host staging of the loss), with the kernels tests' bounds. Outputs start
// as equal values on both sides, so the accumulating ops are compared too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "ops/adam.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"
#include "tests/gpu/device_tensors.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::Mirrored;
using gpu_test::random_floats;
using ops::DeviceContext;
using tensor::Shape;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};

std::vector<float> values(std::size_t n, std::uint32_t seed) {
  return random_floats(n, seed, -2.0f, 2.0f);
}

// Host and device results of one output.
#define EXPECT_BOTH_CLOSE(ctx, t, bound) MDS_EXPECT_CLOSE((t).download(ctx), (t).host, bound)
#define EXPECT_BOTH_EQUAL(ctx, t) EXPECT_EQ((t).download(ctx), (t).host)

TEST(OpsOnDevice, Elementwise) {
  const DeviceContext ctx(kCuda0);
  const std::int64_t n = 4099;
  Mirrored<float> a(ctx, values(n, 1), {n}), b(ctx, values(n, 2), {n}), out(ctx, values(n, 3), {n});
  ops::add(out.h, a.h, b.h);
  ops::add(ctx, out.d, a.d, b.d);
  EXPECT_BOTH_EQUAL(ctx, out);
  ops::scale(out.h, out.h, 0.37f);
  ops::scale(ctx, out.d, out.d, 0.37f);
  EXPECT_BOTH_EQUAL(ctx, out);
  Mirrored<std::uint16_t> half(ctx, std::vector<std::uint16_t>(n), {n});
  const tensor::Tensor half_h(half.host.data(), tensor::DType::kBFloat16, {n});
  const tensor::Tensor half_d = half.buffer.as(tensor::DType::kBFloat16, {n});
  ops::cast(half_h, out.h);
  ops::cast(ctx, half_d, out.d);
  EXPECT_BOTH_EQUAL(ctx, half);
  ops::cast(a.h, half_h);
  ops::cast(ctx, a.d, half_d);
  EXPECT_BOTH_EQUAL(ctx, a);
  ops::fill(b.h, -1.5f);
  ops::fill(ctx, b.d, -1.5f);
  EXPECT_BOTH_EQUAL(ctx, b);
}

TEST(OpsOnDevice, GeluAndLayerNorm) {
  const DeviceContext ctx(kCuda0);
  const std::int64_t rows = 33, cols = 257;
  const Shape shape{rows, cols};
  Mirrored<float> x(ctx, values(rows * cols, 4), shape), dout(ctx, values(rows * cols, 5), shape);
  Mirrored<float> out(ctx, values(rows * cols, 6), shape), dx(ctx, values(rows * cols, 7), shape);
  Mirrored<float> bias(ctx, values(cols, 8), {cols}), dbias(ctx, values(cols, 9), {cols});
  for (const ops::GeluKind kind :
       {ops::GeluKind::kTanhFused, ops::GeluKind::kTanhOpenAI, ops::GeluKind::kErf}) {
    ops::bias_gelu_forward(out.h, x.h, bias.h, kind);
    ops::bias_gelu_forward(ctx, out.d, x.d, bias.d, kind);
    EXPECT_BOTH_CLOSE(ctx, out, 2e-6);
    ops::bias_gelu_backward(dx.h, dbias.h, dout.h, x.h, bias.h, kind);
    ops::bias_gelu_backward(ctx, dx.d, dbias.d, dout.d, x.d, bias.d, kind);
    EXPECT_BOTH_CLOSE(ctx, dx, 2e-6);
    EXPECT_BOTH_CLOSE(ctx, dbias, 1e-5);
    ops::gelu_forward(out.h, x.h, kind);
    ops::gelu_forward(ctx, out.d, x.d, kind);
    EXPECT_BOTH_CLOSE(ctx, out, 2e-6);
    ops::gelu_backward(dx.h, dout.h, x.h, kind);
    ops::gelu_backward(ctx, dx.d, dout.d, x.d, kind);
    EXPECT_BOTH_CLOSE(ctx, dx, 2e-6);
  }
  Mirrored<float> weight(ctx, values(cols, 10), {cols}), dweight(ctx, values(cols, 11), {cols});
  Mirrored<float> mean(ctx, values(rows, 12), {rows}), rstd(ctx, values(rows, 13), {rows});
  ops::layernorm_forward(out.h, mean.h, rstd.h, x.h, weight.h, bias.h, 1e-5f);
  ops::layernorm_forward(ctx, out.d, mean.d, rstd.d, x.d, weight.d, bias.d, 1e-5f);
  EXPECT_BOTH_CLOSE(ctx, out, 1e-5);
  EXPECT_BOTH_CLOSE(ctx, mean, 1e-5);
  EXPECT_BOTH_CLOSE(ctx, rstd, 1e-5);
  ops::layernorm_backward(dx.h, dweight.h, dbias.h, dout.h, x.h, weight.h, mean.h, rstd.h);
  ops::layernorm_backward(ctx, dx.d, dweight.d, dbias.d, dout.d, x.d, weight.d, mean.d, rstd.d);
  EXPECT_BOTH_CLOSE(ctx, dx, 1e-5);
  EXPECT_BOTH_CLOSE(ctx, dweight, 1e-5);
  EXPECT_BOTH_CLOSE(ctx, dbias, 1e-5);
}

TEST(OpsOnDevice, LinearAndBatchedProducts) {
  const DeviceContext ctx(kCuda0);
  const std::int64_t m = 65, k = 96, n = 130;
  Mirrored<float> x(ctx, values(m * k, 14), {m, k}), w(ctx, values(n * k, 15), {n, k});
  Mirrored<float> b(ctx, values(n, 16), {n}), out(ctx, values(m * n, 17), {m, n});
  Mirrored<float> dout(ctx, values(m * n, 18), {m, n}), dx(ctx, values(m * k, 19), {m, k});
  Mirrored<float> dw(ctx, values(n * k, 20), {n, k}), db(ctx, values(n, 21), {n});
  ops::linear_forward(out.h, x.h, w.h, b.h);
  ops::linear_forward(ctx, out.d, x.d, w.d, b.d);
  EXPECT_BOTH_CLOSE(ctx, out, 1e-5);
  ops::linear_backward(dx.h, dw.h, db.h, dout.h, x.h, w.h);
  ops::linear_backward(ctx, dx.d, dw.d, db.d, dout.d, x.d, w.d);
  EXPECT_BOTH_CLOSE(ctx, dx, 1e-5);
  EXPECT_BOTH_CLOSE(ctx, dw, 1e-5);
  EXPECT_BOTH_CLOSE(ctx, db, 1e-5);
  const std::int64_t batch = 3;
  Mirrored<float> p(ctx, values(batch * 7 * 9, 22), {batch, 9, 7});
  Mirrored<float> q(ctx, values(batch * 9 * 5, 23), {batch, 5, 9});
  Mirrored<float> r(ctx, values(batch * 7 * 5, 24), {batch, 7, 5});
  ops::batched_matmul(r.h, p.h, q.h, true, true, 0.5f, 2.0f);
  ops::batched_matmul(ctx, r.d, p.d, q.d, true, true, 0.5f, 2.0f);
  EXPECT_BOTH_CLOSE(ctx, r, 1e-5);
}

// A context with Fp32Matmul::kTf32 (pretrain --tf32): its fp32 products round their inputs to
// TF32 (10-bit mantissas, fp32 accumulation), so they sit within TF32's error of the host's
// (2^-11 relative per input, ~1e-3 of the norm over k = 768 terms) and measurably off it, where
// the default context stays within fp32's 1e-5; the forward, both backward products and the
// batched product alike.
TEST(OpsOnDevice, Tf32ContextRoundsTheFp32Products) {
  const DeviceContext fp32(kCuda0), tf32(kCuda0, ops::Fp32Matmul::kTf32);
  EXPECT_EQ(tf32.fp32_matmul(), ops::Fp32Matmul::kTf32);
  const std::int64_t m = 64, k = 768, n = 256;
  for (const DeviceContext* ctx : {&fp32, &tf32}) {
    const bool rounded = ctx == &tf32;
    SCOPED_TRACE(rounded ? "TF32" : "fp32");
    Mirrored<float> x(*ctx, values(m * k, 31), {m, k}), w(*ctx, values(n * k, 32), {n, k});
    Mirrored<float> out(*ctx, values(m * n, 33), {m, n}), dout(*ctx, values(m * n, 34), {m, n});
    Mirrored<float> dx(*ctx, values(m * k, 35), {m, k}), dw(*ctx, values(n * k, 36), {n, k});
    ops::linear_forward(out.h, x.h, w.h);
    ops::linear_forward(*ctx, out.d, x.d, w.d);
    ops::linear_backward(dx.h, dw.h, {}, dout.h, x.h, w.h, ops::Dx::kOverwrite,
                         ops::Dx::kOverwrite);
    ops::linear_backward(*ctx, dx.d, dw.d, {}, dout.d, x.d, w.d, ops::Dx::kOverwrite,
                         ops::Dx::kOverwrite);
    const std::int64_t batch = 2;
    Mirrored<float> p(*ctx, values(batch * 32 * k, 37), {batch, 32, k});
    Mirrored<float> q(*ctx, values(batch * k * 48, 38), {batch, k, 48});
    Mirrored<float> r(*ctx, values(batch * 32 * 48, 39), {batch, 32, 48});
    ops::batched_matmul(r.h, p.h, q.h, false, false);
    ops::batched_matmul(*ctx, r.d, p.d, q.d, false, false);
    for (Mirrored<float>* t : {&out, &dx, &dw, &r}) {
      const double error = gpu_test::relative_error(t->download(*ctx), t->host);
      if (rounded) {
        EXPECT_LT(error, 3e-3);
        EXPECT_GT(error, 1e-5);
      } else {
        EXPECT_LT(error, 1e-5);
      }
    }
  }
}

TEST(OpsOnDevice, DropoutMasksAreTheHostMasks) {
  const DeviceContext ctx(kCuda0);
  const std::int64_t rows = 17, cols = 255;
  const Shape shape{rows, cols};
  const ops::DropoutStream stream{0.1f, 1234, 99};
  Mirrored<float> x(ctx, values(rows * cols, 25), shape), res(ctx, values(rows * cols, 26), shape);
  Mirrored<float> out(ctx, values(rows * cols, 27), shape), dx(ctx, values(rows * cols, 28), shape);
  Mirrored<float> bias(ctx, values(cols, 29), {cols}), dbias(ctx, values(cols, 30), {cols});
  Mirrored<float> dres(ctx, values(rows * cols, 31), shape);
  ops::dropout_forward(out.h, x.h, stream);
  ops::dropout_forward(ctx, out.d, x.d, stream);
  EXPECT_BOTH_EQUAL(ctx, out);
  ops::dropout_backward(dx.h, x.h, stream);
  ops::dropout_backward(ctx, dx.d, x.d, stream);
  EXPECT_BOTH_EQUAL(ctx, dx);
  ops::bias_dropout_add_forward(out.h, x.h, bias.h, res.h, stream);
  ops::bias_dropout_add_forward(ctx, out.d, x.d, bias.d, res.d, stream);
  EXPECT_BOTH_EQUAL(ctx, out);
  ops::bias_dropout_add_backward(dx.h, dbias.h, dres.h, x.h, stream);
  ops::bias_dropout_add_backward(ctx, dx.d, dbias.d, dres.d, x.d, stream);
  EXPECT_BOTH_EQUAL(ctx, dx);
  EXPECT_BOTH_EQUAL(ctx, dres);
  EXPECT_BOTH_CLOSE(ctx, dbias, 1e-5);
}

TEST(OpsOnDevice, EmbeddingsAreBitIdentical) {
  const DeviceContext ctx(kCuda0);
  const std::int64_t s = 31, b = 3, h = 96, rows = 101, positions = 40;
  std::mt19937 rng(32);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(s * b)), pos(ids.size());
  for (std::int64_t& id : ids) id = std::uniform_int_distribution<std::int64_t>(0, rows - 1)(rng);
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int64_t>(i) / b;
  Mirrored<std::int64_t> tokens(ctx, ids, {s, b}), position_ids(ctx, pos, {s, b});
  Mirrored<float> wte(ctx, values(rows * h, 33), {rows, h});
  Mirrored<float> wpe(ctx, values(positions * h, 34), {positions, h});
  Mirrored<float> out(ctx, values(s * b * h, 35), {s, b, h});
  Mirrored<float> dwte(ctx, values(rows * h, 36), {rows, h});
  ops::embedding_forward(out.h, tokens.h, wte.h, position_ids.h, wpe.h);
  ops::embedding_forward(ctx, out.d, tokens.d, wte.d, position_ids.d, wpe.d);
  EXPECT_BOTH_EQUAL(ctx, out);
  ops::embedding_backward(dwte.h, out.h, tokens.h);
  ops::embedding_backward(ctx, dwte.d, out.d, tokens.d);
  EXPECT_BOTH_EQUAL(ctx, dwte);
  // A vocabulary shard: ids outside it look up zeros.
  ops::embedding_lookup(out.h, tokens.h, wte.h.narrow(0, 50), 20, rows);
  ops::embedding_lookup(ctx, out.d, tokens.d, wte.d.narrow(0, 50), 20, rows);
  EXPECT_BOTH_EQUAL(ctx, out);
}

TEST(OpsOnDevice, CrossEntropyAndTheMaskedMean) {
  const DeviceContext ctx(kCuda0);
  const std::int64_t n = 67, v = 1000;
  std::mt19937 rng(37);
  std::vector<std::int64_t> targets(static_cast<std::size_t>(n));
  for (std::int64_t& t : targets) t = std::uniform_int_distribution<std::int64_t>(0, v - 1)(rng);
  std::vector<float> mask(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 5 == 0 ? 0.0f : 1.0f;
  Mirrored<std::int64_t> labels(ctx, targets, {n});
  Mirrored<float> logits(ctx, random_floats(n * v, 38, -8.0f, 8.0f), {n, v});
  Mirrored<float> loss(ctx, values(n, 39), {n}), max(ctx, values(n, 40), {n});
  Mirrored<float> sum_exp(ctx, values(n, 41), {n}), dloss(ctx, values(n, 42), {n});
  Mirrored<float> loss_mask(ctx, mask, {n});
  ops::cross_entropy_forward(loss.h, max.h, sum_exp.h, logits.h, labels.h);
  ops::cross_entropy_forward(ctx, loss.d, max.d, sum_exp.d, logits.d, labels.d);
  EXPECT_BOTH_CLOSE(ctx, loss, 1e-5);
  EXPECT_BOTH_EQUAL(ctx, max);
  EXPECT_BOTH_CLOSE(ctx, sum_exp, 1e-5);
  EXPECT_BOTH_CLOSE(ctx, logits, 1e-6);  // exp(logit − max), kept for the backward
  const float host_mean = ops::masked_mean_loss(loss.h, loss_mask.h);
  const float device_mean = ops::masked_mean_loss(ctx, loss.d, loss_mask.d);
  EXPECT_NEAR(device_mean, host_mean, 1e-6 * std::abs(host_mean));
  ops::masked_mean_loss_backward(dloss.h, loss_mask.h, 0.25f);
  ops::masked_mean_loss_backward(ctx, dloss.d, loss_mask.d, 0.25f);
  EXPECT_BOTH_EQUAL(ctx, dloss);
  EXPECT_EQ(ops::loss_mask_sum(ctx, loss_mask.d), ops::loss_mask_sum(loss_mask.h));
  ops::fill(ctx, dloss.d, 5.0f);  // the given-sum path (the model's) writes every element too
  ops::masked_mean_loss_backward(ctx, dloss.d, loss_mask.d, 0.25f, ops::loss_mask_sum(loss_mask.h));
  EXPECT_BOTH_EQUAL(ctx, dloss);
  ops::cross_entropy_backward(logits.h, logits.h, labels.h, max.h, sum_exp.h, dloss.h);
  ops::cross_entropy_backward(ctx, logits.d, logits.d, labels.d, max.d, sum_exp.d, dloss.d);
  EXPECT_BOTH_CLOSE(ctx, logits, 1e-5);
}

// The model's attention on each device: the host's probabilities path with its dropout halves,
// the device's flash kernels with the dropout inside, for a head range of a larger layer.
TEST(OpsOnDevice, FlashAttentionMatchesTheHostPath) {
  const DeviceContext ctx(kCuda0);
  const std::int64_t s = 77, b = 2, np = 2, hn = 64;
  const float coeff = 3.0f;
  const ops::HeadRange heads{2, 6};
  for (const float p : {0.0f, 0.1f}) {
    SCOPED_TRACE(p);
    const ops::DropoutStream stream{p, 5, 6};
    Mirrored<float> qkv(ctx, values(s * b * np * 3 * hn, 43), {s, b, np * 3 * hn});
    Mirrored<float> context(ctx, values(s * b * np * hn, 44), {s, b, np * hn});
    Mirrored<float> dcontext(ctx, values(s * b * np * hn, 45), {s, b, np * hn});
    Mirrored<float> dqkv(ctx, values(s * b * np * 3 * hn, 46), {s, b, np * 3 * hn});
    Mirrored<float> lse(ctx, values(b * np * s, 47), {b, np, s});
    std::vector<float> probs(static_cast<std::size_t>(b * np * s * s));
    std::vector<float> dropped(probs.size()), dprobs(probs.size());
    const tensor::Tensor probs_t(probs.data(), tensor::DType::kFloat32, {b, np, s, s});
    const tensor::Tensor dropped_t(dropped.data(), tensor::DType::kFloat32, {b, np, s, s});
    const tensor::Tensor dprobs_t(dprobs.data(), tensor::DType::kFloat32, {b, np, s, s});
    ops::attention_probs_forward(probs_t, qkv.h, coeff);
    if (p == 0.0f) {
      ops::attention_context_forward(context.h, probs_t, qkv.h);
      ops::attention_context_backward(dprobs_t, dqkv.h, dcontext.h, probs_t, qkv.h);
    } else {
      ops::attention_context_forward_with_dropout(context.h, dropped_t, probs_t, qkv.h, stream,
                                                  heads);
      ops::attention_context_backward_with_dropout(dprobs_t, dqkv.h, dropped_t, dcontext.h, probs_t,
                                                   qkv.h, stream, heads);
    }
    ops::attention_probs_backward(dqkv.h, dprobs_t, probs_t, qkv.h, coeff);
    ops::flash_attention_forward(ctx, context.d, lse.d, qkv.d, coeff, stream, heads);
    ops::flash_attention_backward(ctx, dqkv.d, dcontext.d, context.d, lse.d, qkv.d, coeff, stream,
                                  heads);
    EXPECT_BOTH_CLOSE(ctx, context, 1e-5);
    EXPECT_BOTH_CLOSE(ctx, dqkv, 2e-5);
    EXPECT_EQ(gpu_test::non_finite(lse.download(ctx)), 0u);
  }
}

TEST(OpsOnDevice, AdamAndSumOfSquares) {
  const DeviceContext ctx(kCuda0);
  const std::int64_t n = 65537;
  Mirrored<float> params(ctx, values(n, 48), {n}), grads(ctx, values(n, 49), {n});
  Mirrored<float> m(ctx, std::vector<float>(static_cast<std::size_t>(n)), {n});
  Mirrored<float> v(ctx, std::vector<float>(static_cast<std::size_t>(n)), {n});
  ops::AdamWConfig config;
  config.lr = 1e-3f;
  config.weight_decay = 0.1f;
  for (std::int64_t step = 1; step <= 3; ++step) {
    ops::adamw_step(params.h, grads.h, m.h, v.h, config, step);
    ops::adamw_step(ctx, params.d, grads.d, m.d, v.d, config, step);
  }
  EXPECT_BOTH_EQUAL(ctx, params);
  EXPECT_BOTH_EQUAL(ctx, m);
  EXPECT_BOTH_EQUAL(ctx, v);
  const double host = ops::sum_of_squares(grads.h), device = ops::sum_of_squares(ctx, grads.d);
  EXPECT_NEAR(device, host, 1e-12 * host);
  EXPECT_EQ(ops::sum_of_squares(ctx, grads.d), device);
}

TEST(OpsOnDevice, TensorsOfBothDevicesInOneCallFail) {
  const DeviceContext ctx(kCuda0);
  Mirrored<float> a(ctx, values(16, 50), {16});
  try {
    ops::add(ctx, a.d, a.d, a.h);
    FAIL() << "no error";
  } catch (const base::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "ops::add: b and out are on different devices (cpu and cuda:0)");
  }
  try {
    ops::add(ctx, a.h, a.h, a.h);
    FAIL() << "no error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the tensors are on cpu but the DeviceContext runs on "
                                         "cuda:0"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mds
