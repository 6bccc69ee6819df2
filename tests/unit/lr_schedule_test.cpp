#include "train/lr_schedule.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace mds::train {
namespace {

// tr11-176B: 6e-5 -> 6e-6 cosine, warmup 183105 samples, decay 200M samples.
LrScheduleConfig tr11() {
  LrScheduleConfig c;
  c.max_lr = 6e-5;
  c.min_lr = 6e-6;
  c.warmup_steps = 183105;
  c.decay_steps = 200000000;
  c.decay_style = LrDecayStyle::kCosine;
  return c;
}

TEST(AnnealingLR, Tr11CosineSpecVector) {
  const AnnealingLR lr(tr11());
  EXPECT_EQ(lr.lr(), 0.0);  // the constructor sets lr(0)
  EXPECT_EQ(lr.lr_at(0, 0), 0.0);
  EXPECT_NEAR(lr.lr_at(91552, 0), 2.999984e-05, 5e-12);      // spec, rounded
  EXPECT_NEAR(lr.lr_at(100000000, 0), 3.303886e-05, 5e-12);  // spec, rounded
  // Values printed by Python for the upstream formula (bit-exact).
  EXPECT_EQ(lr.lr_at(91552, 0), 2.999983615958057e-05);
  EXPECT_EQ(lr.lr_at(183105, 0), 6e-05);
  EXPECT_EQ(lr.lr_at(183106, 0), 5.9999999999999995e-05);
  EXPECT_EQ(lr.lr_at(12345678, 0), 5.9507851434490374e-05);
  EXPECT_EQ(lr.lr_at(100000000, 0), 3.303886435717357e-05);
  EXPECT_EQ(lr.lr_at(150000000, 0), 1.3921862481411952e-05);
  EXPECT_EQ(lr.lr_at(200000000, 0), 6e-06);
  EXPECT_EQ(lr.lr_at(200000001, 0), 6e-06);
}

LrScheduleConfig toy() {
  LrScheduleConfig c;
  c.max_lr = 1e-3;
  c.min_lr = 1e-4;
  c.warmup_steps = 10;
  c.decay_steps = 100;
  c.decay_style = LrDecayStyle::kLinear;
  return c;
}

TEST(AnnealingLR, ToyLinearSpecVector) {
  const AnnealingLR lr(toy());
  EXPECT_EQ(lr.lr_at(5, 0), 5e-4);
  EXPECT_EQ(lr.lr_at(10, 0), 1e-3);
  EXPECT_EQ(lr.lr_at(37, 0), 0.00073);
  EXPECT_EQ(lr.lr_at(50, 0), 0.0006000000000000001);  // spec: 6e-4
  EXPECT_EQ(lr.lr_at(100, 0), 1e-4);
  EXPECT_EQ(lr.lr_at(101, 0), 1e-4);
}

TEST(AnnealingLR, ConstantKeepsMaxAfterWarmup) {
  LrScheduleConfig c = toy();
  c.decay_style = LrDecayStyle::kConstant;
  const AnnealingLR lr(c);
  EXPECT_EQ(lr.lr_at(5, 0), 5e-4);
  EXPECT_EQ(lr.lr_at(11, 0), 1e-3);
  EXPECT_EQ(lr.lr_at(1000, 0), 1e-3);
}

TEST(AnnealingLR, NoWarmupStartsAtMax) {
  LrScheduleConfig c = toy();
  c.warmup_steps = 0;
  const AnnealingLR lr(c);
  EXPECT_EQ(lr.lr(), 1e-3);
  EXPECT_EQ(lr.lr_at(50, 0), 1e-4 + 0.5 * (1e-3 - 1e-4));
}

TEST(AnnealingLR, FractionalWarmupFromWarmupFraction) {
  // --lr-warmup-fraction 0.01 over 12345 samples: warmup_steps = 123.45 (a float upstream).
  LrScheduleConfig c;
  c.max_lr = 1e-3;
  c.min_lr = 1e-5;
  c.warmup_steps = 0.01 * 12345;
  c.decay_steps = 12345;
  c.decay_style = LrDecayStyle::kCosine;
  const AnnealingLR lr(c);
  EXPECT_EQ(lr.lr_at(100, 0), 0.0008100445524503848);
  EXPECT_EQ(lr.lr_at(123, 0), 0.0009963547995139733);
  EXPECT_EQ(lr.lr_at(124, 0), 0.0009999999950529334);
}

TEST(AnnealingLR, SteppingByGlobalBatch) {
  AnnealingLR lr(toy());
  EXPECT_EQ(lr.lr(), 0.0);  // iteration 1 trains with lr(0) = 0
  lr.step(5, 0);
  EXPECT_EQ(lr.lr(), 5e-4);
  EXPECT_EQ(lr.num_steps(), 5);
  lr.step(45, 0);
  EXPECT_EQ(lr.lr(), 0.0006000000000000001);
}

TEST(AnnealingLR, TokenBasedDecay) {
  LrScheduleConfig c = toy();
  c.decay_tokens = 10000;
  AnnealingLR lr(c);
  lr.step(4, 400);
  EXPECT_EQ(lr.warmup_tokens(), 0);
  lr.step(6, 1000);  // exactly at the warmup boundary: the token count is recorded
  EXPECT_EQ(lr.warmup_tokens(), 1000);
  EXPECT_EQ(lr.lr(), 1e-3);
  lr.step(1, 5500);  // r = (5500 - 1000) / (10000 - 1000) = 0.5
  EXPECT_EQ(lr.lr(), 1e-4 + 0.5 * (1e-3 - 1e-4));
  lr.step(1000, 10001);  // past decay_tokens; sample count no longer matters
  EXPECT_EQ(lr.lr(), 1e-4);
}

TEST(AnnealingLR, TokenBoundaryMissedKeepsZero) {
  LrScheduleConfig c = toy();
  c.decay_tokens = 10000;
  AnnealingLR lr(c);
  lr.step(3, 300);
  lr.step(9, 1200);  // jumps over 10 samples: warmup_tokens stays 0 as upstream
  EXPECT_EQ(lr.warmup_tokens(), 0);
  EXPECT_EQ(lr.lr(), 1e-4 + (1.0 - 0.12) * (1e-3 - 1e-4));
}

TEST(AnnealingLR, ConstructorChecks) {
  auto message = [](LrScheduleConfig c) {
    try {
      AnnealingLR lr(c);
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  LrScheduleConfig c = toy();
  c.min_lr = -1;
  EXPECT_EQ(message(c), "--min-lr must be >= 0, got -1.0");
  c = toy();
  c.min_lr = 1e-2;
  EXPECT_EQ(message(c), "--lr (0.001) must be >= --min-lr (0.01)");
  c = toy();
  c.decay_steps = 0;
  EXPECT_EQ(message(c), "learning-rate decay steps must be > 0, got 0");
  c = toy();
  c.warmup_steps = 100;
  EXPECT_EQ(message(c),
            "learning-rate warmup (100.0 samples) must be shorter than the decay (100 samples)");
  c = toy();
  c.override_lr_scheduler = c.use_checkpoint_lr_scheduler = true;
  EXPECT_EQ(message(c), "--override-lr-scheduler and --use-checkpoint-lr-scheduler are both set");
  c = toy();
  c.decay_tokens = 0;
  EXPECT_EQ(message(c), "--lr-decay-tokens must be > 0, got 0");
}

TEST(AnnealingLR, DecayStyleNames) {
  EXPECT_EQ(parse_lr_decay_style("cosine"), LrDecayStyle::kCosine);
  EXPECT_EQ(parse_lr_decay_style("linear"), LrDecayStyle::kLinear);
  EXPECT_EQ(parse_lr_decay_style("constant"), LrDecayStyle::kConstant);
  EXPECT_EQ(to_string(LrDecayStyle::kCosine), "cosine");
  try {
    parse_lr_decay_style("inverse-square-root");
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_STREQ(e.what(),
                 "--lr-decay-style: invalid choice 'inverse-square-root' (choose from 'constant', "
                 "'linear', 'cosine')");
  }
}

TEST(AnnealingLR, StateRoundTrip) {
  AnnealingLR a(tr11());
  a.step(1600, 3276800);
  const LrSchedulerState s = a.state();
  EXPECT_EQ(s.max_lr, 6e-5);
  EXPECT_EQ(s.min_lr, 6e-6);
  EXPECT_EQ(s.warmup_steps, 183105);
  EXPECT_EQ(s.decay_steps, 200000000);
  EXPECT_EQ(s.num_steps, 1600);
  EXPECT_EQ(s.num_tokens, 3276800);
  EXPECT_EQ(s.warmup_tokens, 0);
  EXPECT_EQ(s.decay_style, "cosine");
  AnnealingLR b(tr11());
  b.load_state(s);
  EXPECT_EQ(b.num_steps(), 1600);
  EXPECT_EQ(b.lr(), a.lr());
}

TEST(AnnealingLR, LoadRulesForMismatchedValues) {
  AnnealingLR a(tr11());
  a.step(2048, 0);
  LrSchedulerState saved = a.state();
  saved.max_lr = 1e-4;
  saved.decay_style = "linear";
  // Neither flag: class and checkpoint must agree.
  AnnealingLR strict(tr11());
  try {
    strict.load_state(saved);
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_STREQ(e.what(),
                 "AnnealingLR: learning rate is 6e-05 on the command line but 0.0001 in the "
                 "checkpoint (use --override-lr-scheduler or --use-checkpoint-lr-scheduler)");
  }
  // --use-checkpoint-lr-scheduler: the checkpoint wins.
  LrScheduleConfig c = tr11();
  c.use_checkpoint_lr_scheduler = true;
  AnnealingLR from_ckpt(c);
  from_ckpt.load_state(saved);
  EXPECT_EQ(from_ckpt.config().max_lr, 1e-4);
  EXPECT_EQ(from_ckpt.config().decay_style, LrDecayStyle::kLinear);
  EXPECT_EQ(from_ckpt.num_steps(), 2048);
  // --override-lr-scheduler: the command line wins; progress still comes from the checkpoint.
  c = tr11();
  c.override_lr_scheduler = true;
  AnnealingLR overridden(c);
  overridden.load_state(saved);
  EXPECT_EQ(overridden.config().max_lr, 6e-5);
  EXPECT_EQ(overridden.config().decay_style, LrDecayStyle::kCosine);
  EXPECT_EQ(overridden.num_steps(), 2048);
  EXPECT_EQ(overridden.lr(), a.lr());
  // An unknown style in the checkpoint.
  saved.decay_style = "inverse_sqrt";
  c = tr11();
  c.use_checkpoint_lr_scheduler = true;
  AnnealingLR bad(c);
  EXPECT_THROW(bad.load_state(saved), base::Error);
}

LrFlags iteration_flags() {
  LrFlags f;
  f.lr = 1e-3;
  f.min_lr = 1e-5;
  f.train_iters = 1000;
  f.global_batch_size = 16;
  return f;
}

TEST(ResolveLrSchedule, IterationBased) {
  LrFlags f = iteration_flags();
  f.lr_warmup_iters = 10;
  LrScheduleConfig c = resolve_lr_schedule(f);
  EXPECT_EQ(c.decay_steps, 16000);
  EXPECT_EQ(c.warmup_steps, 160);
  f.lr_decay_iters = 500;
  EXPECT_EQ(resolve_lr_schedule(f).decay_steps, 8000);
  f.lr_warmup_iters = 0;
  f.lr_warmup_fraction = 0.01;
  EXPECT_EQ(resolve_lr_schedule(f).warmup_steps, 0.01 * 8000);
}

TEST(ResolveLrSchedule, SampleBased) {
  LrFlags f;
  f.lr = 6e-5;
  f.min_lr = 6e-6;
  f.decay_style = LrDecayStyle::kCosine;
  f.train_samples = 220000000;
  f.lr_decay_samples = 200000000;
  f.lr_warmup_samples = 183105;
  f.global_batch_size = 2048;
  f.rampup = true;
  LrScheduleConfig c = resolve_lr_schedule(f);
  EXPECT_EQ(c.decay_steps, 200000000);
  EXPECT_EQ(c.warmup_steps, 183105);
  f.lr_decay_samples.reset();
  EXPECT_EQ(resolve_lr_schedule(f).decay_steps, 220000000);
}

TEST(ResolveLrSchedule, FlagConflicts) {
  auto message = [](const LrFlags& f) {
    try {
      resolve_lr_schedule(f);
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  LrFlags f = iteration_flags();
  f.lr.reset();
  EXPECT_EQ(message(f), "--lr is required for training");
  f = iteration_flags();
  f.train_iters.reset();
  EXPECT_EQ(message(f), "either --train-iters or --train-samples should be provided");
  f = iteration_flags();
  f.train_samples = 5;
  EXPECT_EQ(message(f), "--train-iters and --train-samples are mutually exclusive");
  f = iteration_flags();
  f.lr_decay_samples = 5;
  EXPECT_EQ(message(f), "--lr-decay-samples needs sample-based training (--train-samples)");
  f = iteration_flags();
  f.lr_warmup_samples = 5;
  EXPECT_EQ(message(f), "--lr-warmup-samples needs sample-based training (--train-samples)");
  f = iteration_flags();
  f.rampup = true;
  EXPECT_EQ(message(f), "--rampup-batch-size needs sample-based training (--train-samples)");
  f = iteration_flags();
  f.lr_warmup_fraction = 0.1;
  f.lr_warmup_iters = 3;
  EXPECT_EQ(message(f), "--lr-warmup-fraction and --lr-warmup-iters are mutually exclusive");
  f = iteration_flags();
  f.train_iters.reset();
  f.train_samples = 1000;
  f.lr_decay_iters = 3;
  EXPECT_EQ(message(f), "--lr-decay-iters needs iteration-based training (--train-iters)");
  f.lr_decay_iters.reset();
  f.lr_warmup_iters = 3;
  EXPECT_EQ(message(f), "--lr-warmup-iters needs iteration-based training (--train-iters)");
  f.lr_warmup_iters = 0;
  f.lr_warmup_fraction = 0.1;
  f.lr_warmup_samples = 3;
  EXPECT_EQ(message(f), "--lr-warmup-fraction and --lr-warmup-samples are mutually exclusive");
  f = iteration_flags();
  f.global_batch_size = 0;
  EXPECT_EQ(message(f), "global batch size must be positive");
}

}  // namespace
}  // namespace mds::train
