#include "kernels/cross_entropy.h"

#include <gtest/gtest.h>

#include "ops/cpu/cross_entropy.h"
#include "tests/gpu/gpu_test_util.h"

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

}  // namespace
}  // namespace mds
