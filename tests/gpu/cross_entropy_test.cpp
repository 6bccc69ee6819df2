// The cross-entropy kernels against their CPU twins: fp32 through kernels/ directly, and bf16/fp16
// logits through the public ops with a CUDA context (ops/cuda, the kernels' 16-bit instances):
// bit for bit the fp32 kernels on the widened logits on the same device (max, target logit,
// sum_exp, loss; the gradient rounded once; the fused forward's one-pass sums within 1e-6), the
// 16-bit logits left as they are, and within the fp32 bounds of the host's 16-bit op (the
// gradient within one 16-bit ulp).
#include "kernels/cross_entropy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "ops/cpu/cross_entropy.h"
#include "ops/cross_entropy.h"
#include "tests/gpu/device_tensors.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/half_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_floats;

struct Case {
  std::int64_t n, v;
};
const Case kCases[] = {{1, 1}, {3, 7}, {5, 255}, {4, 257}, {6, 1000}, {3, 50257}, {17, 4099}};

std::vector<std::int64_t> random_targets(std::int64_t n, std::int64_t v, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, v - 1);
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = dist(rng);
  return t;
}

TEST(GpuCrossEntropy, FusedForwardAndBackwardMatchCpu) {
  for (const auto [n, v] : kCases) {
    SCOPED_TRACE(testing::Message() << n << "x" << v);
    const auto un = static_cast<std::size_t>(n), size = static_cast<std::size_t>(n * v);
    const auto logits = random_floats(size, 30, -8.0f, 8.0f);
    const auto targets = random_targets(n, v, 31);
    const auto dloss = random_floats(un, 32);
    // CPU: the four steps, then the backward from the kept exps.
    std::vector<float> exps = logits, max(un), target_logit(un), sum_exp(un), loss(un);
    ops::cpu::cross_entropy_row_max(max.data(), exps.data(), n, v);
    ops::cpu::cross_entropy_target_logit(target_logit.data(), exps.data(), targets.data(),
                                         max.data(), n, v, 0);
    ops::cpu::cross_entropy_exp_sum(sum_exp.data(), exps.data(), max.data(), n, v);
    ops::cpu::cross_entropy_loss(loss.data(), sum_exp.data(), target_logit.data(), n);
    std::vector<float> dlogits(size);
    ops::cpu::cross_entropy_backward(dlogits.data(), exps.data(), targets.data(), sum_exp.data(),
                                     dloss.data(), n, v, 0);

    DeviceArray<float> dlog(logits), dmax(un), dsum(un), dl(un), ddloss(dloss);
    DeviceArray<std::int64_t> dtargets(targets);
    kernels::cross_entropy_forward(dl.get(), dmax.get(), dsum.get(), dlog.get(), dtargets.get(), n,
                                   v, nullptr);
    EXPECT_EQ(dmax.download(), max);  // a max is exact
    MDS_EXPECT_CLOSE(dsum.download(), sum_exp, 1e-5);
    MDS_EXPECT_CLOSE(dl.download(), loss, 1e-5);
    MDS_EXPECT_CLOSE(dlog.download(), exps, 1e-6);
    // In place, as the training step runs it.
    kernels::cross_entropy_backward(dlog.get(), dlog.get(), dtargets.get(), dsum.get(),
                                    ddloss.get(), n, v, 0, nullptr);
    MDS_EXPECT_CLOSE(dlog.download(), dlogits, 1e-5);
  }
}

TEST(GpuCrossEntropy, ShardedStepsMatchCpu) {
  // A vocab shard [vocab_start, vocab_start + v): some targets fall outside it.
  const std::int64_t n = 37, v = 1003, vocab_start = 500;
  const auto un = static_cast<std::size_t>(n), size = static_cast<std::size_t>(n * v);
  const auto logits = random_floats(size, 33, -6.0f, 6.0f);
  const auto targets = random_targets(n, 2 * v + vocab_start, 34);
  const auto dloss = random_floats(un, 35);
  std::vector<float> exps = logits, max(un), target_logit(un), sum_exp(un), loss(un), grad(size);
  ops::cpu::cross_entropy_row_max(max.data(), exps.data(), n, v);
  ops::cpu::cross_entropy_target_logit(target_logit.data(), exps.data(), targets.data(), max.data(),
                                       n, v, vocab_start);
  ops::cpu::cross_entropy_exp_sum(sum_exp.data(), exps.data(), max.data(), n, v);
  ops::cpu::cross_entropy_loss(loss.data(), sum_exp.data(), target_logit.data(), n);
  ops::cpu::cross_entropy_backward(grad.data(), exps.data(), targets.data(), sum_exp.data(),
                                   dloss.data(), n, v, vocab_start);

  DeviceArray<float> dlog(logits), dmax(un), dtl(un), dsum(un), dl(un), ddloss(dloss), dgrad(size);
  DeviceArray<std::int64_t> dtargets(targets);
  kernels::cross_entropy_row_max(dmax.get(), dlog.get(), n, v, nullptr);
  kernels::cross_entropy_target_logit(dtl.get(), dlog.get(), dtargets.get(), dmax.get(), n, v,
                                      vocab_start, nullptr);
  kernels::cross_entropy_exp_sum(dsum.get(), dlog.get(), dmax.get(), n, v, nullptr);
  kernels::cross_entropy_loss(dl.get(), dsum.get(), dtl.get(), n, nullptr);
  kernels::cross_entropy_backward(dgrad.get(), dlog.get(), dtargets.get(), dsum.get(), ddloss.get(),
                                  n, v, vocab_start, nullptr);
  EXPECT_EQ(dmax.download(), max);
  EXPECT_EQ(dtl.download(), target_logit);  // one subtraction: exact twin
  MDS_EXPECT_CLOSE(dsum.download(), sum_exp, 1e-5);
  MDS_EXPECT_CLOSE(dl.download(), loss, 1e-5);
  MDS_EXPECT_CLOSE(dgrad.download(), grad, 1e-5);
}

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

template <typename T>
std::vector<T> rounded(const std::vector<float>& values) {
  std::vector<T> out;
  for (const float x : values) out.push_back(tensor::round_to<T>(x));
  return out;
}

template <typename T>
std::vector<float> widened(const std::vector<T>& values) {
  std::vector<float> out;
  for (const T x : values) out.push_back(tensor::to_float(x));
  return out;
}

template <typename T>
class GpuCrossEntropy16Bit : public ::testing::Test {};
TYPED_TEST_SUITE(GpuCrossEntropy16Bit, gpu_test::HalfTypes);

// One run of the loss on [n, v] logits of a shard at vocab_start (fused when vocab_start is 0 and
// `fused`), then the backward in place, on host and device tensors alike.
template <typename E>
struct Run {
  Run(const ops::DeviceContext& ctx, const std::vector<E>& logits0,
      const std::vector<std::int64_t>& targets, const std::vector<float>& dloss0, std::int64_t n,
      std::int64_t v)
      : logits(ctx, logits0, {n, v}),
        labels(ctx, targets, {n}),
        dloss(ctx, dloss0, {n}),
        max(ctx, std::vector<float>(static_cast<std::size_t>(n), NAN), {n}),
        target_logit(ctx, std::vector<float>(static_cast<std::size_t>(n), NAN), {n}),
        sum_exp(ctx, std::vector<float>(static_cast<std::size_t>(n), NAN), {n}),
        loss(ctx, std::vector<float>(static_cast<std::size_t>(n), NAN), {n}) {}

  // On the host (ctx null) or the device.
  void forward(const ops::DeviceContext* ctx, bool fused, std::int64_t vocab_start) {
    const ops::DeviceContext host;
    const ops::DeviceContext& c = ctx != nullptr ? *ctx : host;
    const bool d = ctx != nullptr;
    const auto t = [&](gpu_test::Mirrored<float>& m) { return d ? m.d : m.h; };
    const tensor::Tensor l = d ? logits.d : logits.h, y = d ? labels.d : labels.h;
    if (fused) {
      ops::cross_entropy_forward(c, t(loss), t(max), t(sum_exp), l, y);
      return;
    }
    ops::cross_entropy_row_max(c, t(max), l);
    ops::cross_entropy_target_logit(c, t(target_logit), l, y, t(max), vocab_start);
    ops::cross_entropy_exp_sum(c, t(sum_exp), l, t(max));
    ops::cross_entropy_loss(c, t(loss), t(sum_exp), t(target_logit));
  }
  void backward(const ops::DeviceContext* ctx, std::int64_t vocab_start) {
    const ops::DeviceContext host;
    const ops::DeviceContext& c = ctx != nullptr ? *ctx : host;
    const bool d = ctx != nullptr;
    const tensor::Tensor l = d ? logits.d : logits.h;
    ops::cross_entropy_backward(c, l, l, d ? labels.d : labels.h, d ? max.d : max.h,
                                d ? sum_exp.d : sum_exp.h, d ? dloss.d : dloss.h, vocab_start);
  }

  gpu_test::Mirrored<E> logits;
  gpu_test::Mirrored<std::int64_t> labels;
  gpu_test::Mirrored<float> dloss, max, target_logit, sum_exp, loss;
};

template <typename T>
void check_16bit(std::int64_t n, std::int64_t v, std::int64_t vocab_start, bool fused,
                 std::uint32_t seed) {
  const std::string what =
      std::string(fused ? "fused " : "steps ") + std::to_string(n) + "x" + std::to_string(v);
  SCOPED_TRACE(what);
  const ops::DeviceContext ctx(tensor::Device{tensor::DeviceKind::kCuda, 0});
  const auto logits = rounded<T>(random_floats(static_cast<std::size_t>(n * v), seed, -8.0f, 8.0f));
  const auto targets = random_targets(n, v + 2 * vocab_start, seed + 1);
  const auto dloss = random_floats(static_cast<std::size_t>(n), seed + 2);

  Run<T> half(ctx, logits, targets, dloss, n, v);
  Run<float> wide(ctx, widened(logits), targets, dloss, n, v);
  half.forward(&ctx, fused, vocab_start);
  wide.forward(&ctx, fused, vocab_start);
  EXPECT_EQ(bits_of(half.max.download(ctx)), bits_of(wide.max.download(ctx)));
  if (!fused) {
    EXPECT_EQ(bits_of(half.target_logit.download(ctx)), bits_of(wide.target_logit.download(ctx)));
  }
  if (fused) {  // a 16-bit row in one pass: its sums differ from the two passes' by rounding
    MDS_EXPECT_CLOSE(half.sum_exp.download(ctx), wide.sum_exp.download(ctx), 1e-6);
    MDS_EXPECT_CLOSE(half.loss.download(ctx), wide.loss.download(ctx), 1e-6);
  } else {
    EXPECT_EQ(bits_of(half.sum_exp.download(ctx)), bits_of(wide.sum_exp.download(ctx)));
    EXPECT_EQ(bits_of(half.loss.download(ctx)), bits_of(wide.loss.download(ctx)));
  }
  EXPECT_EQ(bits_of(half.logits.download(ctx)), bits_of(logits)) << "the forward wrote the logits";
  half.backward(&ctx, vocab_start);
  wide.backward(&ctx, vocab_start);
  if (!fused) {  // the fused gradient is checked against the host's below
    EXPECT_EQ(bits_of(half.logits.download(ctx)), bits_of(rounded<T>(wide.logits.download(ctx))))
        << "the gradient is not the fp32 kernels' rounded once";
  }

  // Against the host's 16-bit op (the fp32 CPU functions on the widened rows).
  half.forward(nullptr, fused, vocab_start);
  EXPECT_EQ(half.max.download(ctx), half.max.host);
  if (!fused) {
    EXPECT_EQ(half.target_logit.download(ctx), half.target_logit.host);
  }
  MDS_EXPECT_CLOSE(half.sum_exp.download(ctx), half.sum_exp.host, 1e-5);
  MDS_EXPECT_CLOSE(half.loss.download(ctx), half.loss.host, 1e-5);
  half.backward(nullptr, vocab_start);
  gpu_test::expect_one_ulp(ctx, half.logits, what + " gradient");
}

TYPED_TEST(GpuCrossEntropy16Bit, LogitsAreReadAsTheirWidenedFp32Values) {
  std::uint32_t seed = 50;
  for (const auto [n, v] : kCases) {
    check_16bit<TypeParam>(n, v, 0, true, seed);
    seed += 3;
  }
  // A vocab shard [vocab_start, vocab_start + v) that some targets miss.
  check_16bit<TypeParam>(37, 1003, 500, false, 70);
}

// ops::cross_entropy_forward_backward on the device (one kernel, a few blocks an SM walking the
// rows) against the forward then the backward on the same device: loss and gradient bit for
// bit, the gradient over the logits or apart (then the logits are left as they were); the
// host's one call too. 600 rows of GPT-2's 50304: each block takes several rows.
template <typename E>
std::vector<E> stored_as(const std::vector<float>& values) {
  if constexpr (std::is_same_v<E, float>) {
    return values;
  } else {
    return rounded<E>(values);
  }
}

template <typename E>
void check_forward_backward(std::int64_t n, std::int64_t v, std::uint32_t seed) {
  SCOPED_TRACE(testing::Message() << tensor::dtype_name(tensor::dtype_of<E>()) << " " << n << "x"
                                  << v);
  const ops::DeviceContext ctx(tensor::Device{tensor::DeviceKind::kCuda, 0});
  const auto un = static_cast<std::size_t>(n);
  std::vector<float> wide = random_floats(static_cast<std::size_t>(n * v), seed, -8.0f, 8.0f);
  const std::vector<E> logits = stored_as<E>(wide);
  auto targets = random_targets(n, v, seed + 1);
  targets[0] = v + 2;  // no target in the row
  const auto dloss = random_floats(un, seed + 2);

  Run<E> two(ctx, logits, targets, dloss, n, v);
  two.forward(&ctx, true, 0);
  two.backward(&ctx, 0);
  const std::vector<float> want_loss = two.loss.download(ctx);
  const std::vector<E> want_grad = two.logits.download(ctx);

  Run<E> one(ctx, logits, targets, dloss, n, v);
  ops::cross_entropy_forward_backward(ctx, one.loss.d, one.logits.d, one.logits.d, one.labels.d,
                                      one.dloss.d);
  EXPECT_EQ(bits_of(one.loss.download(ctx)), bits_of(want_loss));
  EXPECT_EQ(bits_of(one.logits.download(ctx)), bits_of(want_grad)) << "in place";

  Run<E> apart(ctx, logits, targets, dloss, n, v);
  gpu_test::Mirrored<E> grad(ctx, stored_as<E>(std::vector<float>(logits.size(), 7.0f)), {n, v});
  ops::cross_entropy_forward_backward(ctx, apart.loss.d, grad.d, apart.logits.d, apart.labels.d,
                                      apart.dloss.d);
  EXPECT_EQ(bits_of(apart.loss.download(ctx)), bits_of(want_loss));
  EXPECT_EQ(bits_of(grad.download(ctx)), bits_of(want_grad)) << "apart";
  EXPECT_EQ(bits_of(apart.logits.download(ctx)), bits_of(logits)) << "the logits changed";

  // The host's one call: the host's two ops, within the bounds above of the device's.
  ops::cross_entropy_forward_backward(one.loss.h, one.logits.h, one.logits.h, one.labels.h,
                                      one.dloss.h);
  MDS_EXPECT_CLOSE(one.loss.host, want_loss, 1e-5);
}

TEST(GpuCrossEntropy, ForwardBackwardInOneKernelIsTheTwoKernels) {
  for (const auto [n, v] : {Case{5, 1000}, Case{7, 1003}, Case{600, 50304}}) {
    check_forward_backward<float>(n, v, 80);
    check_forward_backward<tensor::BFloat16>(n, v, 81);
    check_forward_backward<tensor::Float16>(n, v, 82);
  }
}

}  // namespace
}  // namespace mds
