#include "train/loss_scaler.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "config/deepspeed_config.h"

namespace mds::train {
namespace {

const std::vector<bool> kOverflows = {true,  true, false, false, false, false, true,
                                      false, true, true,  false, false, false};

std::vector<double> run(LossScaler& scaler, std::vector<int64_t>* hysteresis = nullptr) {
  std::vector<double> scales;
  for (bool overflow : kOverflows) {
    EXPECT_EQ(scaler.update(overflow), overflow);  // overflow always skips the step
    scales.push_back(scaler.scale());
    if (hysteresis) hysteresis->push_back(scaler.cur_hysteresis());
  }
  return scales;
}

DynamicLossScaleArgs spec_args() {
  DynamicLossScaleArgs args;
  args.init_scale = 4096;
  args.scale_window = 4;
  args.delayed_shift = 2;
  return args;
}

TEST(LossScaler, ZeroRuleSpecSequence) {
  LossScaler scaler = LossScaler::dynamic(LossScaleRule::kDynamicZero, spec_args());
  std::vector<int64_t> hysteresis;
  EXPECT_EQ(run(scaler, &hysteresis), (std::vector<double>{4096, 2048, 2048, 2048, 2048, 4096, 4096,
                                                           4096, 2048, 1024, 1024, 1024, 1024}));
  EXPECT_EQ(hysteresis, (std::vector<int64_t>{1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(scaler.state().cur_iter, 13);
  EXPECT_EQ(scaler.state().last_overflow_iter, 9);
}

TEST(LossScaler, ZeroRuleConsecutiveHysteresisSpecSequence) {
  DynamicLossScaleArgs args = spec_args();
  args.consecutive_hysteresis = true;
  LossScaler scaler = LossScaler::dynamic(LossScaleRule::kDynamicZero, args);
  EXPECT_EQ(run(scaler), (std::vector<double>{4096, 2048, 2048, 2048, 2048, 4096, 4096, 4096, 4096,
                                              2048, 2048, 2048, 2048}));
}

TEST(LossScaler, Fp16OptimizerRuleSpecSequence) {
  LossScaler scaler = LossScaler::dynamic(LossScaleRule::kDynamicFp16Opt, spec_args());
  EXPECT_EQ(run(scaler), (std::vector<double>{2048, 1024, 1024, 1024, 1024, 1024, 512, 512, 256,
                                              128, 128, 128, 128}));
}

TEST(LossScaler, WindowDoublesAfterCleanSteps) {
  DynamicLossScaleArgs args = spec_args();
  args.delayed_shift = 1;
  LossScaler zero = LossScaler::dynamic(LossScaleRule::kDynamicZero, args);
  LossScaler fp16 = LossScaler::dynamic(LossScaleRule::kDynamicFp16Opt, args);
  std::vector<double> zero_scales, fp16_scales;
  for (int i = 0; i < 9; ++i) {
    zero.update(false);
    fp16.update(false);
    zero_scales.push_back(zero.scale());
    fp16_scales.push_back(fp16.scale());
  }
  // ZeRO: (cur_iter + 1) % 4 == 0 at iterations 3, 7; FP16_Optimizer: cur_iter % 4 == 0, cur_iter >
  // 0.
  EXPECT_EQ(zero_scales,
            (std::vector<double>{4096, 4096, 4096, 8192, 8192, 8192, 8192, 16384, 16384}));
  EXPECT_EQ(fp16_scales,
            (std::vector<double>{4096, 4096, 4096, 4096, 8192, 8192, 8192, 8192, 16384}));
}

TEST(LossScaler, ZeroRuleAbortsAtMinimumScale) {
  DynamicLossScaleArgs args;
  args.init_scale = 4;
  args.min_scale = 1;
  LossScaler scaler = LossScaler::dynamic(LossScaleRule::kDynamicZero, args);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 2);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1);
  try {
    scaler.update(true);
    FAIL() << "no error at the minimum scale";
  } catch (const base::Error& e) {
    EXPECT_STREQ(e.what(),
                 "Current loss scale already at minimum (1) - cannot decrease scale anymore. "
                 "Exiting run.");
  }
  args.raise_error_at_min_scale = false;
  LossScaler lenient = LossScaler::dynamic(LossScaleRule::kDynamicZero, args);
  for (int i = 0; i < 4; ++i) lenient.update(true);
  EXPECT_EQ(lenient.scale(), 1);
}

TEST(LossScaler, MinimumScaleClampsHalving) {
  DynamicLossScaleArgs args;
  args.init_scale = 3;
  args.min_scale = 2;
  LossScaler zero = LossScaler::dynamic(LossScaleRule::kDynamicZero, args);
  zero.update(true);
  EXPECT_EQ(zero.scale(), 2);
  LossScaler fp16 = LossScaler::dynamic(LossScaleRule::kDynamicFp16Opt, args);
  fp16.update(true);
  fp16.update(true);  // FP16_Optimizer never aborts
  EXPECT_EQ(fp16.scale(), 2);
}

TEST(LossScaler, StaticScaleSkipsButNeverChanges) {
  LossScaler scaler = LossScaler::static_scale(128);
  EXPECT_FALSE(scaler.is_dynamic());
  EXPECT_TRUE(scaler.update(true));
  EXPECT_FALSE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 128);
  EXPECT_THROW(LossScaler::static_scale(0), base::Error);
}

TEST(LossScaler, NoneNeverSkips) {
  LossScaler scaler = LossScaler::none();
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 1);
}

TEST(LossScaler, RejectsInvalidArguments) {
  DynamicLossScaleArgs args;
  args.scale_window = 0;
  EXPECT_THROW(LossScaler::dynamic(LossScaleRule::kDynamicZero, args), base::Error);
  args = {};
  args.delayed_shift = 0;
  EXPECT_THROW(LossScaler::dynamic(LossScaleRule::kDynamicZero, args), base::Error);
  args = {};
  args.min_scale = 0;
  EXPECT_THROW(LossScaler::dynamic(LossScaleRule::kDynamicZero, args), base::Error);
  EXPECT_THROW(LossScaler::dynamic(LossScaleRule::kStatic, {}), base::Error);
}

TEST(LossScaler, StateRoundTripContinuesIdentically) {
  LossScaler a = LossScaler::dynamic(LossScaleRule::kDynamicZero, spec_args());
  for (int i = 0; i < 7; ++i) a.update(kOverflows[i]);
  LossScaler b = LossScaler::dynamic(LossScaleRule::kDynamicZero, DynamicLossScaleArgs{});
  b.load_state(a.state());
  for (size_t i = 7; i < kOverflows.size(); ++i) {
    a.update(kOverflows[i]);
    b.update(kOverflows[i]);
    EXPECT_EQ(a.scale(), b.scale());
    EXPECT_EQ(a.cur_hysteresis(), b.cur_hysteresis());
  }
  LossScaler s = LossScaler::static_scale(8);
  EXPECT_THROW(s.load_state(a.state()), base::Error);
}

TEST(LossScaler, Fp16OptimizerLoadKeepsConfiguredMinimum) {
  DynamicLossScaleArgs args = spec_args();
  args.min_scale = 512;
  LossScaler fp16 = LossScaler::dynamic(LossScaleRule::kDynamicFp16Opt, args);
  LossScalerState saved;
  saved.dynamic = true;
  saved.cur_scale = 1024;
  saved.cur_iter = 5;
  saved.last_overflow_iter = 3;
  saved.scale_window = 2;
  saved.min_scale = 1;
  fp16.load_state(saved);
  EXPECT_EQ(fp16.state().min_scale, 512);
  EXPECT_EQ(fp16.state().scale_window, 2);
  fp16.update(true);
  fp16.update(true);
  EXPECT_EQ(fp16.scale(), 512);
}

config::DeepSpeedConfig parse(const std::string& json) {
  return config::parse_deepspeed_config(json, "ds.json");
}

TEST(LossScalerFromConfig, PicksRuleAndDefaults) {
  // bf16 and fp32: no scaling.
  EXPECT_EQ(LossScaler::from_config(parse(R"({"train_batch_size": 8, "bf16": {"enabled": true}})"))
                .rule(),
            LossScaleRule::kNone);
  EXPECT_EQ(LossScaler::from_config(parse(R"({"train_batch_size": 8})")).rule(),
            LossScaleRule::kNone);
  // Static.
  const LossScaler fixed = LossScaler::from_config(
      parse(R"({"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 1024}})"));
  EXPECT_EQ(fixed.rule(), LossScaleRule::kStatic);
  EXPECT_EQ(fixed.scale(), 1024);
  // ZeRO with no dynamic keys: DynamicLossScaler() constructor defaults.
  const LossScaler zero_defaults = LossScaler::from_config(parse(
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 1}, "fp16": {"enabled": true}})"));
  EXPECT_EQ(zero_defaults.rule(), LossScaleRule::kDynamicZero);
  EXPECT_EQ(zero_defaults.scale(), 4294967296.0);
  EXPECT_EQ(zero_defaults.state().delayed_shift, 1);
  EXPECT_EQ(zero_defaults.state().scale_window, 1000);
  // ZeRO with one dynamic key: the JSON defaults for the others (power 16, hysteresis 2).
  const LossScaler zero_json =
      LossScaler::from_config(parse(R"({"train_batch_size": 8, "zero_optimization": {"stage": 1},
                "fp16": {"enabled": true, "loss_scale_window": 500}})"));
  EXPECT_EQ(zero_json.scale(), 65536.0);
  EXPECT_EQ(zero_json.state().delayed_shift, 2);
  EXPECT_EQ(zero_json.state().scale_window, 500);
  // Stage 0: FP16_Optimizer starts at 2^initial_scale_power (default 16) either way.
  const LossScaler fp16_defaults =
      LossScaler::from_config(parse(R"({"train_batch_size": 8, "fp16": {"enabled": true}})"));
  EXPECT_EQ(fp16_defaults.rule(), LossScaleRule::kDynamicFp16Opt);
  EXPECT_EQ(fp16_defaults.scale(), 65536.0);
  // The tr1-13B block.
  const LossScaler tr1 =
      LossScaler::from_config(parse(R"({"train_batch_size": 8, "zero_optimization": {"stage": 1},
                "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 500,
                         "hysteresis": 2, "min_loss_scale": 1, "initial_scale_power": 12}})"));
  EXPECT_EQ(tr1.scale(), 4096);
  EXPECT_EQ(tr1.state().cur_hysteresis, 2);
  EXPECT_EQ(tr1.state().scale_window, 500);
  // consecutive_hysteresis alone also counts as a dynamic key (DeepSpeed master).
  const LossScaler consecutive =
      LossScaler::from_config(parse(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2},
                "fp16": {"enabled": true, "consecutive_hysteresis": true}})"));
  EXPECT_TRUE(consecutive.state().consecutive_hysteresis);
  EXPECT_EQ(consecutive.scale(), 65536.0);
}

}  // namespace
}  // namespace mds::train
