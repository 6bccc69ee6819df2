#include "train/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "config/deepspeed_config.h"

namespace mds::train {

LossScaler LossScaler::none() {
  return LossScaler(LossScaleRule::kNone, LossScalerState{});
}

LossScaler LossScaler::static_scale(double scale) {
  if (!(scale > 0.0) || !std::isfinite(scale))
    base::fail("static loss scale must be a positive number, got ", scale);
  LossScalerState state;
  state.cur_scale = scale;
  return LossScaler(LossScaleRule::kStatic, state);
}

LossScaler LossScaler::dynamic(LossScaleRule rule, const DynamicLossScaleArgs& args) {
  if (rule != LossScaleRule::kDynamicZero && rule != LossScaleRule::kDynamicFp16Opt)
    base::fail("LossScaler::dynamic needs a dynamic rule");
  if (!(args.init_scale > 0.0) || !std::isfinite(args.init_scale))
    base::fail("initial loss scale must be a positive number, got ", args.init_scale);
  if (args.scale_window < 1) base::fail("loss_scale_window must be >= 1, got ", args.scale_window);
  if (!(args.min_scale > 0.0)) base::fail("min_loss_scale must be > 0, got ", args.min_scale);
  if (args.delayed_shift < 1) base::fail("hysteresis must be >= 1, got ", args.delayed_shift);
  LossScalerState state;
  state.dynamic = true;
  state.cur_scale = args.init_scale;
  state.scale_window = args.scale_window;
  state.min_scale = args.min_scale;
  state.delayed_shift = args.delayed_shift;
  state.cur_hysteresis = args.delayed_shift;
  state.consecutive_hysteresis = args.consecutive_hysteresis;
  state.raise_error_at_min_scale = args.raise_error_at_min_scale;
  return LossScaler(rule, state);
}

LossScaler LossScaler::from_config(const config::DeepSpeedConfig& config) {
  const config::Fp16Config& fp16 = config.fp16;
  if (!fp16.enabled) return none();
  if (fp16.loss_scale > 0.0) return static_scale(fp16.loss_scale);
  DynamicLossScaleArgs args;
  const double power_scale = std::ldexp(1.0, static_cast<int>(fp16.initial_scale_power));
  if (config.zero.stage == 0) {
    // FP16_Optimizer takes the JSON values (or their defaults) whether or not any key is present.
    args.init_scale = power_scale;
    args.scale_window = fp16.loss_scale_window;
    args.min_scale = fp16.min_loss_scale;
    return dynamic(LossScaleRule::kDynamicFp16Opt, args);
  }
  if (fp16.has_dynamic_args) {
    args.init_scale = power_scale;
    args.scale_window = fp16.loss_scale_window;
    args.min_scale = fp16.min_loss_scale;
    args.delayed_shift = fp16.hysteresis;
    args.consecutive_hysteresis = fp16.consecutive_hysteresis;
  }
  return dynamic(LossScaleRule::kDynamicZero, args);
}

bool LossScaler::update(bool overflow) {
  switch (rule_) {
    case LossScaleRule::kNone:
      return false;
    case LossScaleRule::kStatic:
      state_.cur_iter += 1;
      return overflow;
    case LossScaleRule::kDynamicZero:
      update_zero(overflow);
      return overflow;
    case LossScaleRule::kDynamicFp16Opt:
      update_fp16_optimizer(overflow);
      return overflow;
  }
  return overflow;
}

void LossScaler::update_zero(bool overflow) {
  LossScalerState& s = state_;
  if (overflow) {
    if (s.delayed_shift == 1 || s.cur_hysteresis == 1) {
      if (s.cur_scale == s.min_scale && s.raise_error_at_min_scale)
        base::fail("Current loss scale already at minimum (", s.min_scale,
                   ") - cannot decrease scale anymore. Exiting run.");
      s.cur_scale = std::max(s.cur_scale / s.scale_factor, s.min_scale);
    } else {
      s.cur_hysteresis -= 1;
    }
    s.last_overflow_iter = s.cur_iter;
  } else {
    if (s.consecutive_hysteresis) s.cur_hysteresis = s.delayed_shift;
    if ((s.cur_iter - s.last_overflow_iter) % s.scale_window == 0) {
      if (!s.consecutive_hysteresis) s.cur_hysteresis = s.delayed_shift;
      s.cur_scale *= s.scale_factor;
    }
  }
  s.cur_iter += 1;
}

void LossScaler::update_fp16_optimizer(bool overflow) {
  LossScalerState& s = state_;
  if (overflow) {
    s.cur_scale = std::max(s.cur_scale / s.scale_factor, s.min_scale);
    s.last_overflow_iter = s.cur_iter;
  } else {
    // The window counts clean steps since the one after the last overflow.
    const int64_t stable_interval = (s.cur_iter - s.last_overflow_iter) - 1;
    if (stable_interval > 0 && stable_interval % s.scale_window == 0) s.cur_scale *= s.scale_factor;
  }
  s.cur_iter += 1;
}

void LossScaler::load_state(const LossScalerState& saved) {
  if (saved.dynamic != state_.dynamic)
    base::fail("checkpoint has a ", saved.dynamic ? "dynamic" : "static",
               " loss scaler but the configuration asks for a ",
               state_.dynamic ? "dynamic" : "static", " one");
  if (rule_ == LossScaleRule::kDynamicFp16Opt) {
    state_.cur_scale = saved.cur_scale;
    state_.cur_iter = saved.cur_iter;
    state_.last_overflow_iter = saved.last_overflow_iter;
    state_.scale_factor = saved.scale_factor;
    state_.scale_window = saved.scale_window;
    return;
  }
  if (rule_ == LossScaleRule::kDynamicZero) {
    if (saved.scale_window < 1 || saved.delayed_shift < 1 || !(saved.scale_factor > 0.0))
      base::fail("checkpoint loss scaler has an invalid window, hysteresis or factor");
    state_ = saved;
    return;
  }
  // Static (and none): only the scale is state; the configured one was already checked equal in
  // kind, and upstream restores the saved scale.
  state_.cur_scale = saved.cur_scale;
  state_.cur_iter = saved.cur_iter;
}

}  // namespace mds::train
