// The cross-entropy kernels' device code (kernels/cross_entropy_kernels.cuh) run on the CPU under
// the SIMT emulation with the launch shapes kernels/cross_entropy.cu uses, against their CPU twins
// (ops/cpu/cross_entropy): the fused one-block-per-row forward and the in-place backward against
// the CPU's four steps and backward, and the four vocab-parallel steps on a shard that some targets
// miss. Bounds of tests/gpu/cross_entropy_test.cpp: max and the target logit bit for bit, sums,
// losses and gradients 1e-5, the kept exps 1e-6. Outputs start poisoned, guards stay untouched,
// reruns give the same bits; the loss kernel's grid-stride loop also runs on a narrowed grid.
// bf16/fp16 logits: bit for bit the kF32 kernels on the widened logits (max, target logit,
// sum_exp, loss; the gradient rounded once), except the fused forward's one-pass sums (within 1e-6,
// the gradient within one 16-bit ulp); the logits left unchanged by the forward, and against the
// CPU's 16-bit steps with the bounds above (the gradient within one 16-bit ulp).
// First the emulation (CUDA keywords, device_common.cuh's host twins), then the kernels.
#include "tests/unit/emulated_device_common.h"

#include "kernels/cross_entropy_kernels.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/cross_entropy.h"
#include "tests/unit/emulated_compare.h"
#include "tests/unit/guarded_buffer.h"

namespace mds {
namespace {

namespace ck = kernels::cross_entropy_detail;
using emulated::bits_of;
using emulated::GuardedBuffer;
using emulated::StorageOf;
using emulated::to_fp32;
using emulated::to_storage;
using kernels::detail::Storage;

std::vector<std::int64_t> random_targets(std::int64_t n, std::int64_t v, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, v - 1);
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = dist(rng);
  return t;
}

// The CPU's steps on [n, v] logits of a shard starting at vocab_start, then the backward.
struct CpuSteps {
  std::vector<float> exps, max, target_logit, sum_exp, loss, dlogits;
};

CpuSteps cpu_steps(const std::vector<float>& logits, const std::vector<std::int64_t>& targets,
                   const std::vector<float>& dloss, std::int64_t n, std::int64_t v,
                   std::int64_t vocab_start) {
  const auto un = static_cast<std::size_t>(n);
  CpuSteps c{logits,
             std::vector<float>(un),
             std::vector<float>(un),
             std::vector<float>(un),
             std::vector<float>(un),
             std::vector<float>(logits.size())};
  ops::cpu::cross_entropy_row_max(c.max.data(), c.exps.data(), n, v);
  ops::cpu::cross_entropy_target_logit(c.target_logit.data(), c.exps.data(), targets.data(),
                                       c.max.data(), n, v, vocab_start);
  ops::cpu::cross_entropy_exp_sum(c.sum_exp.data(), c.exps.data(), c.max.data(), n, v);
  ops::cpu::cross_entropy_loss(c.loss.data(), c.sum_exp.data(), c.target_logit.data(), n);
  ops::cpu::cross_entropy_backward(c.dlogits.data(), c.exps.data(), targets.data(),
                                   c.sum_exp.data(), dloss.data(), n, v, vocab_start);
  return c;
}

struct Case {
  std::int64_t n, v;
};

TEST(KernelsEmulatedCrossEntropy, FusedForwardAndInPlaceBackwardMatchCpu) {
  // Rows of a multiple of 8 (1000, 2048, GPT-2's padded 50304) take eight elements a thread.
  const Case cases[] = {{1, 1},     {3, 7},     {5, 255},   {4, 257},  {6, 1000},
                        {2, 50257}, {17, 4099}, {3, 50304}, {9, 2048}, {1, 8}};
  for (const Case& c : cases) {
    const std::int64_t n = c.n, v = c.v;
    const std::string what = std::to_string(n) + "x" + std::to_string(v);
    const auto un = static_cast<std::size_t>(n), size = static_cast<std::size_t>(n * v);
    const std::vector<float> logits0 = emulated::random_floats(size, 30, -8.0f, 8.0f);
    const GuardedBuffer<std::int64_t> targets(random_targets(n, v, 31));
    const GuardedBuffer<float> dloss(emulated::random_floats(un, 32));
    const CpuSteps want = cpu_steps(logits0, targets.values(), dloss.values(), n, v, 0);

    GuardedBuffer<float> logits(logits0), loss(un), max(un), sum_exp(un);
    const auto run = [&] {
      logits.assign(logits0);
      loss.poison();
      max.poison();
      sum_exp.poison();
      const bool by_8 = ck::rows_by_8(v, {logits.data()});
      emulated::launch(ck::row_shape(n), [&] {
        (by_8 ? ck::forward_kernel<Storage::kF32, true>
              : ck::forward_kernel<Storage::kF32, false>)(loss.data(), max.data(), sum_exp.data(),
                                                          logits.data(), targets.data(), v);
      });
      const std::vector<float> exps = logits.values();
      // In place, as the training step runs it.
      emulated::launch(ck::row_shape(n), [&] {
        (by_8 ? ck::backward_kernel<Storage::kF32, true>
              : ck::backward_kernel<Storage::kF32, false>)(logits.data(), logits.data(),
                                                           targets.data(), nullptr, sum_exp.data(),
                                                           dloss.data(), v, 0);
      });
      EXPECT_EQ(logits.guard_bytes_written() + loss.guard_bytes_written() +
                    max.guard_bytes_written() + sum_exp.guard_bytes_written(),
                0u)
          << what;
      return std::make_tuple(max.values(), sum_exp.values(), loss.values(), exps, logits.values());
    };
    const auto [got_max, got_sum, got_loss, got_exps, got_dlogits] = run();
    EXPECT_EQ(got_max, want.max) << what;  // a max is exact
    emulated::expect_close(got_sum, want.sum_exp, 1e-5, what + " fused sum_exp");
    emulated::expect_close(got_loss, want.loss, 1e-5, what + " fused loss");
    emulated::expect_close(got_exps, want.exps, 1e-6, what + " fused exps");
    emulated::expect_close(got_dlogits, want.dlogits, 1e-5, what + " backward in place");
    const auto [max2, sum2, loss2, exps2, dlogits2] = run();
    EXPECT_EQ(bits_of(sum2), bits_of(got_sum)) << what << " rerun";
    EXPECT_EQ(bits_of(loss2), bits_of(got_loss)) << what << " rerun";
    EXPECT_EQ(bits_of(dlogits2), bits_of(got_dlogits)) << what << " rerun";
  }
}

// A vocab shard [vocab_start, vocab_start + v): some targets fall outside it.
void check_vocab_parallel_steps(std::int64_t v) {
  SCOPED_TRACE(v);
  const std::int64_t n = 37, vocab_start = 500;
  const auto un = static_cast<std::size_t>(n), size = static_cast<std::size_t>(n * v);
  const GuardedBuffer<float> logits0(emulated::random_floats(size, 33, -6.0f, 6.0f));
  const GuardedBuffer<std::int64_t> targets(random_targets(n, 2 * v + vocab_start, 34));
  const GuardedBuffer<float> dloss(emulated::random_floats(un, 35));
  const CpuSteps want =
      cpu_steps(logits0.values(), targets.values(), dloss.values(), n, v, vocab_start);

  GuardedBuffer<float> logits(logits0.values()), max(un), target_logit(un), sum_exp(un), loss(un),
      grad(size);
  const bool by_8 = ck::rows_by_8(v, {logits.data(), grad.data()});
  EXPECT_EQ(by_8, v % 8 == 0);
  emulated::launch(ck::row_shape(n), [&] {
    (by_8 ? ck::row_max_kernel<Storage::kF32, true>
          : ck::row_max_kernel<Storage::kF32, false>)(max.data(), logits.data(), v);
  });
  emulated::launch(ck::target_logit_shape(n), [&] {
    ck::target_logit_kernel<Storage::kF32>(target_logit.data(), logits.data(), targets.data(),
                                           max.data(), n, v, vocab_start);
  });
  emulated::launch(ck::row_shape(n), [&] {
    (by_8 ? ck::exp_sum_kernel<Storage::kF32, true>
          : ck::exp_sum_kernel<Storage::kF32, false>)(sum_exp.data(), logits.data(), max.data(), v);
  });
  emulated::launch(ck::loss_shape(n),
                   [&] { ck::loss_kernel(loss.data(), sum_exp.data(), target_logit.data(), n); });
  emulated::launch(ck::row_shape(n), [&] {
    (by_8 ? ck::backward_kernel<Storage::kF32, true>
          : ck::backward_kernel<Storage::kF32, false>)(grad.data(), logits.data(), targets.data(),
                                                       nullptr, sum_exp.data(), dloss.data(), v,
                                                       vocab_start);
  });
  EXPECT_EQ(max.values(), want.max);
  EXPECT_EQ(target_logit.values(), want.target_logit);  // one subtraction: exact twin
  emulated::expect_close(logits.values(), want.exps, 1e-6, "sharded exps");
  emulated::expect_close(sum_exp.values(), want.sum_exp, 1e-5, "sharded sum_exp");
  emulated::expect_close(loss.values(), want.loss, 1e-5, "sharded loss");
  emulated::expect_close(grad.values(), want.dlogits, 1e-5, "sharded grad");
  for (const auto* b : {&logits, &max, &target_logit, &sum_exp, &loss, &grad}) {
    EXPECT_EQ(b->guard_bytes_written(), 0u);
  }
}

// One element a thread (1003) and eight (1000).
TEST(KernelsEmulatedCrossEntropy, VocabParallelStepsMatchCpu) {
  check_vocab_parallel_steps(1003);
  check_vocab_parallel_steps(1000);
}

// One launch of each step on [n, v] logits stored as kS (a shard starting at vocab_start), then
// the backward in place; the outputs and what the logits hold after the forward.
template <Storage kS>
struct KernelSteps {
  std::vector<float> max, target_logit, sum_exp, loss;
  std::vector<typename StorageOf<kS>::Elem> after_forward, dlogits;
};

// fused: forward_kernel (vocab_start must be 0); else the four vocab-parallel steps.
template <Storage kS>
KernelSteps<kS> run_kernels(const std::vector<typename StorageOf<kS>::Elem>& logits0,
                            const GuardedBuffer<std::int64_t>& targets,
                            const GuardedBuffer<float>& dloss, std::int64_t n, std::int64_t v,
                            std::int64_t vocab_start, bool fused, const std::string& what) {
  using T = typename StorageOf<kS>::Elem;
  const auto un = static_cast<std::size_t>(n);
  GuardedBuffer<T> logits(logits0);
  GuardedBuffer<float> max(un), target_logit(un), sum_exp(un), loss(un);
  const bool by_8 = ck::rows_by_8(v, {logits.data()});
  if (fused) {
    emulated::launch(ck::row_shape(n), [&] {
      (by_8 ? ck::forward_kernel<kS, true>
            : ck::forward_kernel<kS, false>)(loss.data(), max.data(), sum_exp.data(), logits.data(),
                                             targets.data(), v);
    });
  } else {
    emulated::launch(ck::row_shape(n), [&] {
      (by_8 ? ck::row_max_kernel<kS, true> : ck::row_max_kernel<kS, false>)(max.data(),
                                                                            logits.data(), v);
    });
    emulated::launch(ck::target_logit_shape(n), [&] {
      ck::target_logit_kernel<kS>(target_logit.data(), logits.data(), targets.data(), max.data(), n,
                                  v, vocab_start);
    });
    emulated::launch(ck::row_shape(n), [&] {
      (by_8 ? ck::exp_sum_kernel<kS, true>
            : ck::exp_sum_kernel<kS, false>)(sum_exp.data(), logits.data(), max.data(), v);
    });
    emulated::launch(ck::loss_shape(n),
                     [&] { ck::loss_kernel(loss.data(), sum_exp.data(), target_logit.data(), n); });
  }
  KernelSteps<kS> out{max.values(),     fused ? std::vector<float>{} : target_logit.values(),
                      sum_exp.values(), loss.values(),
                      logits.values(),  {}};
  emulated::launch(ck::row_shape(n), [&] {
    (by_8 ? ck::backward_kernel<kS, true>
          : ck::backward_kernel<kS, false>)(logits.data(), logits.data(), targets.data(),
                                            max.data(), sum_exp.data(), dloss.data(), v,
                                            vocab_start);
  });
  out.dlogits = logits.values();
  for (const std::size_t written :
       {logits.guard_bytes_written(), max.guard_bytes_written(), target_logit.guard_bytes_written(),
        sum_exp.guard_bytes_written(), loss.guard_bytes_written()}) {
    EXPECT_EQ(written, 0u) << what;
  }
  return out;
}

// The CPU's 16-bit steps (ops/cpu/cross_entropy.h) on the same logits, then its backward.
template <Storage kS>
CpuSteps cpu_steps_16bit(const std::vector<typename StorageOf<kS>::Elem>& logits,
                         const std::vector<std::int64_t>& targets, const std::vector<float>& dloss,
                         std::int64_t n, std::int64_t v, std::int64_t vocab_start) {
  const auto un = static_cast<std::size_t>(n);
  constexpr tensor::DType kDType = StorageOf<kS>::kDType;
  CpuSteps c{{},
             std::vector<float>(un),
             std::vector<float>(un),
             std::vector<float>(un),
             std::vector<float>(un),
             std::vector<float>(logits.size())};
  ops::cpu::cross_entropy_row_max(c.max.data(), logits.data(), kDType, n, v);
  ops::cpu::cross_entropy_target_logit(c.target_logit.data(), logits.data(), kDType, targets.data(),
                                       c.max.data(), n, v, vocab_start);
  ops::cpu::cross_entropy_exp_sum(c.sum_exp.data(), logits.data(), kDType, c.max.data(), n, v);
  ops::cpu::cross_entropy_loss(c.loss.data(), c.sum_exp.data(), c.target_logit.data(), n);
  std::vector<typename StorageOf<kS>::Elem> grad(logits.size());
  ops::cpu::cross_entropy_backward(grad.data(), logits.data(), kDType, targets.data(), c.max.data(),
                                   c.sum_exp.data(), dloss.data(), n, v, vocab_start);
  c.dlogits = to_fp32<kS>(grad);
  return c;
}

template <Storage kS>
void check_16bit(std::int64_t n, std::int64_t v, std::int64_t vocab_start, bool fused,
                 std::uint32_t seed) {
  const std::string what = std::string(emulated::storage_name(kS)) +
                           (fused ? " fused " : " steps ") + std::to_string(n) + "x" +
                           std::to_string(v);
  const auto un = static_cast<std::size_t>(n), size = static_cast<std::size_t>(n * v);
  const auto logits = to_storage<kS>(emulated::random_floats(size, seed, -8.0f, 8.0f));
  const GuardedBuffer<std::int64_t> targets(random_targets(n, v + 2 * vocab_start, seed + 1));
  const GuardedBuffer<float> dloss(emulated::random_floats(un, seed + 2));

  const KernelSteps<kS> got =
      run_kernels<kS>(logits, targets, dloss, n, v, vocab_start, fused, what);
  // The fp32 kernels on the widened logits: the old path's numbers.
  const KernelSteps<Storage::kF32> wide = run_kernels<Storage::kF32>(
      to_fp32<kS>(logits), targets, dloss, n, v, vocab_start, fused, what + " (fp32 kernels)");
  EXPECT_EQ(bits_of(got.max), bits_of(wide.max)) << what;
  EXPECT_EQ(bits_of(got.target_logit), bits_of(wide.target_logit)) << what;
  EXPECT_EQ(bits_of(got.after_forward), bits_of(logits))
      << what << ": the forward wrote the logits";
  if (fused) {  // one pass over a 16-bit row: the sums differ by rounding
    emulated::expect_close(got.sum_exp, wide.sum_exp, 1e-6, what + " sum_exp, one pass");
    emulated::expect_close(got.loss, wide.loss, 1e-6, what + " loss, one pass");
    emulated::expect_activation_close<kS>(got.dlogits, wide.dlogits, 1e-6,
                                          what + " gradient, one pass");
  } else {
    EXPECT_EQ(bits_of(got.sum_exp), bits_of(wide.sum_exp)) << what;
    EXPECT_EQ(bits_of(got.loss), bits_of(wide.loss)) << what;
    emulated::expect_activation_equal<kS>(got.dlogits, wide.dlogits, what + " gradient");
  }

  // Against the CPU twin, with the fp32 bounds (the gradient within one 16-bit ulp).
  const CpuSteps want =
      cpu_steps_16bit<kS>(logits, targets.values(), dloss.values(), n, v, vocab_start);
  EXPECT_EQ(got.max, want.max) << what;
  if (!fused) {
    EXPECT_EQ(got.target_logit, want.target_logit) << what;
    EXPECT_GT(std::count(got.target_logit.begin(), got.target_logit.end(), 0.0f), 0) << what;
  }
  emulated::expect_close(got.sum_exp, want.sum_exp, 1e-5, what + " sum_exp");
  emulated::expect_close(got.loss, want.loss, 1e-5, what + " loss");
  emulated::expect_activation_close<kS>(got.dlogits, want.dlogits, 1e-5, what + " gradient");

  const KernelSteps<kS> again =
      run_kernels<kS>(logits, targets, dloss, n, v, vocab_start, fused, what);
  EXPECT_EQ(bits_of(again.sum_exp), bits_of(got.sum_exp)) << what << " rerun";
  EXPECT_EQ(bits_of(again.dlogits), bits_of(got.dlogits)) << what << " rerun";
}

TEST(KernelsEmulatedCrossEntropy, SixteenBitLogitsAreTheFp32KernelsOnWidenedLogits) {
  const Case cases[] = {{1, 1},    {3, 7},     {5, 255},   {4, 257},
                        {6, 1000}, {2, 50257}, {17, 4099}, {3, 50304}};
  std::uint32_t seed = 40;
  for (const Case& c : cases) {
    check_16bit<Storage::kBF16>(c.n, c.v, 0, true, seed);
    check_16bit<Storage::kF16>(c.n, c.v, 0, true, seed);
    seed += 3;
  }
  // A vocab shard [vocab_start, vocab_start + v) that some targets miss.
  check_16bit<Storage::kBF16>(37, 1003, 500, false, 60);
  check_16bit<Storage::kF16>(37, 1003, 500, false, 60);
  check_16bit<Storage::kBF16>(37, 1000, 500, false, 63);
}

// The one-pass 16-bit forward on rows the two passes treat specially: -inf logits (masked words)
// add nothing, a row of -inf only or holding a NaN or +inf gets a NaN sum and loss, as the fp32
// kernels' two passes give them; the maxes are theirs bit for bit.
TEST(KernelsEmulatedCrossEntropy, OnePassRowsWithInfinitiesAndNaNsAsTwoPasses) {
  constexpr std::int64_t n = 4, v = 1000;
  std::vector<float> wide =
      emulated::random_floats(static_cast<std::size_t>(n * v), 80, -8.0f, 8.0f);
  for (std::int64_t j = 0; j < v; ++j) {  // threads whose elements are all -inf, and others
    if (j < 512 || j % 3 == 0) wide[static_cast<std::size_t>(j)] = -INFINITY;
  }
  for (std::int64_t j = 0; j < v; ++j) wide[static_cast<std::size_t>(v + j)] = -INFINITY;
  wide[static_cast<std::size_t>(2 * v + 517)] = NAN;
  wide[static_cast<std::size_t>(3 * v + 3)] = INFINITY;
  const auto logits = to_storage<Storage::kBF16>(wide);
  const GuardedBuffer<std::int64_t> targets(std::vector<std::int64_t>{601, 2, 3, 4});
  const GuardedBuffer<float> dloss(std::vector<float>(n, 1.0f));
  const KernelSteps<Storage::kBF16> got =
      run_kernels<Storage::kBF16>(logits, targets, dloss, n, v, 0, true, "special rows");
  const KernelSteps<Storage::kF32> two = run_kernels<Storage::kF32>(
      to_fp32<Storage::kBF16>(logits), targets, dloss, n, v, 0, true, "special rows (fp32)");
  EXPECT_EQ(bits_of(got.max), bits_of(two.max));
  EXPECT_NEAR(got.sum_exp[0], two.sum_exp[0], 1e-6 * two.sum_exp[0]);
  EXPECT_NEAR(got.loss[0], two.loss[0], 1e-6 * std::abs(two.loss[0]));
  for (std::size_t row = 1; row < 4; ++row) {
    EXPECT_TRUE(std::isnan(two.sum_exp[row])) << row;
    EXPECT_TRUE(std::isnan(got.sum_exp[row])) << row;
    EXPECT_TRUE(std::isnan(got.loss[row])) << row;
  }
}

// forward_backward_kernel against forward_kernel then backward_kernel (in place) on the same
// logits: loss and gradient bit for bit, written into a separate dlogits or over the logits, on
// a grid narrower than the rows (each block walks several) and on forward_backward_shape's own.
template <Storage kS>
void check_forward_backward(std::int64_t n, std::int64_t v, unsigned blocks, std::uint32_t seed) {
  using T = typename StorageOf<kS>::Elem;
  const std::string what = std::string(emulated::storage_name(kS)) + " " + std::to_string(n) + "x" +
                           std::to_string(v) + " on " + std::to_string(blocks) + " blocks";
  const auto un = static_cast<std::size_t>(n), size = static_cast<std::size_t>(n * v);
  std::vector<float> wide = emulated::random_floats(size, seed, -8.0f, 8.0f);
  wide[static_cast<std::size_t>(v / 2)] = -INFINITY;  // a masked word
  if (n > 2) {  // a row holding a NaN: NaN sum, loss and gradient either way
    wide[static_cast<std::size_t>(2 * v + 1)] = NAN;
  }
  const std::vector<T> logits0 = to_storage<kS>(wide);
  std::vector<std::int64_t> ids = random_targets(n, v, seed + 1);
  ids[0] = v + 3;  // out of range: no target logit, no one-hot term
  const GuardedBuffer<std::int64_t> targets(ids);
  const GuardedBuffer<float> dloss(emulated::random_floats(un, seed + 2));
  const bool by_8 = ck::rows_by_8(v, {logits0.data()});

  GuardedBuffer<T> two_pass(logits0);
  GuardedBuffer<float> loss_two(un), max(un), sum_exp(un);
  emulated::launch(ck::row_shape(n), [&] {
    (by_8 ? ck::forward_kernel<kS, true>
          : ck::forward_kernel<kS, false>)(loss_two.data(), max.data(), sum_exp.data(),
                                           two_pass.data(), targets.data(), v);
  });
  emulated::launch(ck::row_shape(n), [&] {
    (by_8 ? ck::backward_kernel<kS, true>
          : ck::backward_kernel<kS, false>)(two_pass.data(), two_pass.data(), targets.data(),
                                            max.data(), sum_exp.data(), dloss.data(), v, 0);
  });

  for (const bool in_place : {true, false}) {
    const std::string where = what + (in_place ? ", in place" : ", apart");
    GuardedBuffer<T> logits(logits0), apart(size);
    GuardedBuffer<float> loss(un);
    T* dlogits = in_place ? logits.data() : apart.data();
    const auto kernel =
        by_8 ? ck::forward_backward_kernel<kS, true> : ck::forward_backward_kernel<kS, false>;
    emulated::launch_narrowed(
        ck::forward_backward_shape(n, v, sizeof(T), 132, 50 << 20), blocks,
        [&] { kernel(loss.data(), dlogits, logits.data(), targets.data(), dloss.data(), n, v); });
    EXPECT_EQ(bits_of(loss.values()), bits_of(loss_two.values())) << where << " loss";
    EXPECT_EQ(bits_of(in_place ? logits.values() : apart.values()), bits_of(two_pass.values()))
        << where << " gradient";
    if (!in_place) {
      EXPECT_EQ(bits_of(logits.values()), bits_of(logits0)) << where << ": the logits changed";
    }
    EXPECT_EQ(
        logits.guard_bytes_written() + apart.guard_bytes_written() + loss.guard_bytes_written(), 0u)
        << where;
  }
  if (n > 2) {
    EXPECT_TRUE(std::isnan(loss_two.values()[2])) << what << ": the NaN row";
  }
}

TEST(KernelsEmulatedCrossEntropy, ForwardBackwardKernelIsTheTwoKernelsBitForBit) {
  // 1000 and 8200: eight elements a visit (8200: a batch of four visits, then a tail); 1003 and
  // 1100: one a visit (1100: some threads batch, others only take the tail).
  check_forward_backward<Storage::kF32>(5, 1000, 2, 90);
  check_forward_backward<Storage::kF32>(7, 1003, 3, 91);
  check_forward_backward<Storage::kBF16>(3, 8200, 1, 92);
  check_forward_backward<Storage::kBF16>(6, 1100, 4, 93);
  check_forward_backward<Storage::kF16>(5, 1000, 5, 94);
  check_forward_backward<Storage::kF32>(2, 8200, 2, 95);
}

// The grid keeps the rows in flight within 60% of the L2 but at least two blocks an SM and at
// most eight, and never more blocks than rows.
TEST(KernelsEmulatedCrossEntropy, ForwardBackwardShapeBoundsTheRowsInFlight) {
  const std::int64_t h100_l2 = 50 << 20;
  // GPT-2's bf16 rows (100 KB) on an H100: 2 an SM, 26 MB in flight.
  EXPECT_EQ(ck::forward_backward_shape(8192, 50304, 2, 132, h100_l2).grid.x, 264u);
  EXPECT_EQ(ck::forward_backward_shape(8192, 50304, 2, 132, h100_l2).block.x,
            static_cast<unsigned>(kernels::detail::kThreads));
  // fp32 rows would fit once an SM: still two.
  EXPECT_EQ(ck::forward_backward_shape(8192, 50304, 4, 132, h100_l2).grid.x, 264u);
  // Small rows: at most eight an SM.
  EXPECT_EQ(ck::forward_backward_shape(100000, 1000, 2, 132, h100_l2).grid.x, 8u * 132u);
  // Between: 0.6 · 50 MiB / (132 · 16 KB) = 14.9 → 8; 0.6 · 50 MiB / (132 · 64 KB) = 3.7 → 3.
  EXPECT_EQ(ck::forward_backward_shape(100000, 32768, 2, 132, h100_l2).grid.x, 3u * 132u);
  // Fewer rows than blocks: one block a row.
  EXPECT_EQ(ck::forward_backward_shape(5, 50304, 2, 132, h100_l2).grid.x, 5u);
  // The variant with twice the blocks an SM (timed against the default): 4 for GPT-2's rows, 6
  // for the 64 KB ones, still at most eight.
  EXPECT_EQ(ck::forward_backward_shape(8192, 50304, 2, 132, h100_l2, 2).grid.x, 4u * 132u);
  EXPECT_EQ(ck::forward_backward_shape(100000, 32768, 2, 132, h100_l2, 2).grid.x, 6u * 132u);
  EXPECT_EQ(ck::forward_backward_shape(100000, 1000, 2, 132, h100_l2, 2).grid.x, 8u * 132u);
}

// The loss kernel is a grid-stride loop (one thread per row before: rows past 2^24 were left
// unwritten): 1000 rows on one block wrap four times.
TEST(KernelsEmulatedCrossEntropy, LossLoopWrapsOnANarrowGrid) {
  const std::int64_t n = 1000;
  const auto un = static_cast<std::size_t>(n);
  const GuardedBuffer<float> sum_exp(emulated::random_floats(un, 36, 1.0f, 100.0f));
  const GuardedBuffer<float> target_logit(emulated::random_floats(un, 37, -5.0f, 0.0f));
  std::vector<float> want(un);
  ops::cpu::cross_entropy_loss(want.data(), sum_exp.data(), target_logit.data(), n);
  GuardedBuffer<float> loss(un);
  emulated::launch_narrowed(ck::loss_shape(n), 1, [&] {
    ck::loss_kernel(loss.data(), sum_exp.data(), target_logit.data(), n);
  });
  EXPECT_EQ(loss.values(), want);  // one log and one subtraction, the host's on both sides
  EXPECT_EQ(loss.guard_bytes_written(), 0u);
}

}  // namespace
}  // namespace mds
