// Megatron's AnnealingLR (megatron/learning_rates.py): linear warmup, then constant, linear or
// cosine decay to min_lr, counted in samples (or, with --lr-decay-tokens, decayed over tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mds::train {

enum class LrDecayStyle { kConstant, kLinear, kCosine };

// "constant", "linear" or "cosine" (the only --lr-decay-style choices of the fork); anything else
// is an Error naming the choices.
LrDecayStyle parse_lr_decay_style(std::string_view name);
std::string_view to_string(LrDecayStyle style);

// The Megatron flags that shape the schedule, before derivation.
struct LrFlags {
  std::optional<double> lr;  // --lr
  double min_lr = 0.0;       // --min-lr
  LrDecayStyle decay_style = LrDecayStyle::kLinear;
  std::optional<int64_t> train_iters;        // --train-iters
  std::optional<int64_t> train_samples;      // --train-samples
  std::optional<int64_t> lr_decay_iters;     // --lr-decay-iters
  std::optional<int64_t> lr_decay_samples;   // --lr-decay-samples
  std::optional<int64_t> lr_decay_tokens;    // --lr-decay-tokens
  std::optional<double> lr_warmup_fraction;  // --lr-warmup-fraction
  int64_t lr_warmup_iters = 0;               // --lr-warmup-iters
  int64_t lr_warmup_samples = 0;             // --lr-warmup-samples
  int64_t global_batch_size = 0;             // final G (after ramp-up)
  bool rampup = false;                       // --rampup-batch-size given
  bool override_lr_scheduler = false;
  bool use_checkpoint_lr_scheduler = false;
};

// The class values of AnnealingLR. Steps are samples; warmup_steps is a double because
// --lr-warmup-fraction makes it one upstream (and it is saved so in checkpoints).
struct LrScheduleConfig {
  double max_lr = 0.0;
  double min_lr = 0.0;
  double warmup_steps = 0.0;
  int64_t decay_steps = 0;
  LrDecayStyle decay_style = LrDecayStyle::kLinear;
  std::optional<int64_t> decay_tokens;
  bool override_lr_scheduler = false;
  bool use_checkpoint_lr_scheduler = false;
};

// Applies arguments.py's consistency checks (iteration- and sample-based options are exclusive,
// ramp-up needs sample-based training, one warmup form only) and get_learning_rate_scheduler's
// derivation of warmup/decay steps. Violations are Errors naming the flags.
LrScheduleConfig resolve_lr_schedule(const LrFlags& flags);

// The `lr_scheduler` dict of a checkpoint (checkpoints.md §1.2).
struct LrSchedulerState {
  double max_lr = 0.0;
  double warmup_steps = 0.0;
  int64_t num_steps = 0;
  int64_t warmup_tokens = 0;
  int64_t num_tokens = 0;
  std::string decay_style;
  int64_t decay_steps = 0;
  double min_lr = 0.0;
};

class AnnealingLR {
 public:
  // Validates the config (min_lr >= 0, max_lr >= min_lr, decay_steps > 0, warmup < decay, not both
  // override and use-checkpoint) and sets lr(0) as upstream's constructor does.
  explicit AnnealingLR(const LrScheduleConfig& config);

  // The LR for a given position; pure (does not record warmup_tokens).
  double lr_at(int64_t num_steps, int64_t num_tokens) const;

  // Advances by `increment` samples (the current global batch, after each successful optimizer
  // step); `num_tokens` is consumed_train_tokens before this iteration's tokens were added.
  void step(int64_t increment, int64_t num_tokens);

  double lr() const { return lr_; }
  int64_t num_steps() const { return num_steps_; }
  int64_t num_tokens() const { return num_tokens_; }
  int64_t warmup_tokens() const { return warmup_tokens_; }
  const LrScheduleConfig& config() const { return config_; }

  LrSchedulerState state() const;
  // Upstream load_state_dict: the class value wins with --override-lr-scheduler, the checkpoint
  // value with --use-checkpoint-lr-scheduler, otherwise both must be equal (an Error names the
  // field). Then num_steps/num_tokens/warmup_tokens are restored and the LR recomputed.
  void load_state(const LrSchedulerState& saved);

 private:
  double compute(int64_t num_steps, int64_t num_tokens, int64_t warmup_tokens) const;

  LrScheduleConfig config_;
  int64_t num_steps_ = 0;
  int64_t num_tokens_ = 0;
  int64_t warmup_tokens_ = 0;
  double lr_ = 0.0;
};

}  // namespace mds::train
