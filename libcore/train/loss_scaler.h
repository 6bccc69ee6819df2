// fp16 loss scaling as DeepSpeed does it: a static scale, or a dynamic scale that halves on
// overflow and doubles after a window of clean steps. Two dynamic rules exist upstream: the ZeRO
// optimizer's DynamicLossScaler (with hysteresis) and FP16_Optimizer's own (fp16 + ZeRO stage 0).
#pragma once

#include <cstdint>

namespace mds::config {
struct DeepSpeedConfig;
}

namespace mds::train {

enum class LossScaleRule {
  kNone,            // bf16 / fp32: scale 1, overflow never skips a step
  kStatic,          // fp16.loss_scale > 0: constant scale, overflow still skips the step
  kDynamicZero,     // deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler (ZeRO 1/2)
  kDynamicFp16Opt,  // deepspeed.runtime.fp16.fused_optimizer.FP16_Optimizer (ZeRO 0)
};

struct DynamicLossScaleArgs {
  double init_scale = 4294967296.0;  // 2^32, DynamicLossScaler's constructor default
  int64_t scale_window = 1000;
  double min_scale = 1.0;
  int64_t delayed_shift = 1;  // "hysteresis"
  bool consecutive_hysteresis = false;
  bool raise_error_at_min_scale = true;
};

// Everything upstream checkpoints: the attributes of the pickled DynamicLossScaler (ZeRO), of
// which FP16_Optimizer saves the subset {dynamic, cur_scale, cur_iter, last_overflow_iter,
// scale_factor, scale_window}.
struct LossScalerState {
  bool dynamic = false;
  double cur_scale = 1.0;
  int64_t cur_iter = 0;
  int64_t last_overflow_iter = -1;
  double scale_factor = 2.0;
  int64_t scale_window = 1000;
  double min_scale = 1.0;
  int64_t delayed_shift = 1;
  int64_t cur_hysteresis = 1;
  bool consecutive_hysteresis = false;
  bool raise_error_at_min_scale = true;
};

class LossScaler {
 public:
  static LossScaler none();
  static LossScaler static_scale(double scale);
  static LossScaler dynamic(LossScaleRule rule, const DynamicLossScaleArgs& args);

  // The scaler DeepSpeed builds for this config: none for bf16 or fp32; static for fp16 with
  // loss_scale > 0; otherwise FP16_Optimizer's rule at ZeRO stage 0 and DynamicLossScaler's at
  // stage >= 1. Without any dynamic key in the fp16 block DynamicLossScaler takes its constructor
  // defaults (2^32, window 1000, min 1, hysteresis 1) while FP16_Optimizer still starts at
  // 2^initial_scale_power (default 2^16).
  static LossScaler from_config(const config::DeepSpeedConfig& config);

  LossScaleRule rule() const { return rule_; }
  bool is_dynamic() const { return state_.dynamic; }
  // The factor the micro-batch loss is multiplied by before backward.
  double scale() const { return state_.cur_scale; }
  // Hysteresis left before the next overflow halves the scale (ZeRO rule).
  int64_t cur_hysteresis() const { return state_.cur_hysteresis; }

  // Called once per optimizer step with whether any gradient was inf/nan. Returns true when the
  // optimizer step must be skipped (weights, Adam state and LR untouched). Throws an Error when a
  // ZeRO-rule scaler would have to go below min_scale (upstream aborts the run there).
  bool update(bool overflow);

  const LossScalerState& state() const { return state_; }
  // ZeRO restores the whole pickled scaler; FP16_Optimizer only its subset (min_scale and the
  // hysteresis fields keep the configured values).
  void load_state(const LossScalerState& saved);

 private:
  LossScaler(LossScaleRule rule, const LossScalerState& state) : rule_(rule), state_(state) {}
  void update_zero(bool overflow);
  void update_fp16_optimizer(bool overflow);

  LossScaleRule rule_;
  LossScalerState state_;
};

}  // namespace mds::train
