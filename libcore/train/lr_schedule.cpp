#include "train/lr_schedule.h"

#include <charconv>
#include <cmath>
#include <numbers>

#include "base/error.h"

namespace mds::train {
namespace {

// Python's repr of a float (shortest round-trip digits; scientific below 1e-4 and from 1e16),
// so that messages show the values as the upstream flags would.
std::string shortest(double value) {
  char buffer[64];
  auto sci = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  const std::string scientific(buffer, sci.ptr);
  const auto e = scientific.find('e');
  if (!std::isfinite(value) || e == std::string::npos) return scientific;
  const int exponent = std::stoi(scientific.substr(e + 1));
  if (exponent < -4 || exponent >= 16) return scientific;
  auto fixed = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed);
  std::string text(buffer, fixed.ptr);
  if (text.find('.') == std::string::npos) text += ".0";
  return text;
}

}  // namespace

LrDecayStyle parse_lr_decay_style(std::string_view name) {
  if (name == "constant") return LrDecayStyle::kConstant;
  if (name == "linear") return LrDecayStyle::kLinear;
  if (name == "cosine") return LrDecayStyle::kCosine;
  base::fail("--lr-decay-style: invalid choice '", name,
             "' (choose from 'constant', 'linear', 'cosine')");
}

std::string_view to_string(LrDecayStyle style) {
  switch (style) {
    case LrDecayStyle::kConstant:
      return "constant";
    case LrDecayStyle::kLinear:
      return "linear";
    case LrDecayStyle::kCosine:
      return "cosine";
  }
  return "linear";
}

LrScheduleConfig resolve_lr_schedule(const LrFlags& flags) {
  if (!flags.lr) base::fail("--lr is required for training");
  if (flags.global_batch_size <= 0) base::fail("global batch size must be positive");
  const bool by_iters = flags.train_iters && *flags.train_iters > 0;
  const bool by_samples = flags.train_samples && *flags.train_samples > 0;
  // The checks of megatron/arguments.py, in its order.
  if (by_iters) {
    if (flags.train_samples) base::fail("--train-iters and --train-samples are mutually exclusive");
    if (flags.lr_decay_samples)
      base::fail("--lr-decay-samples needs sample-based training (--train-samples)");
    if (flags.lr_warmup_samples != 0)
      base::fail("--lr-warmup-samples needs sample-based training (--train-samples)");
    if (flags.rampup)
      base::fail("--rampup-batch-size needs sample-based training (--train-samples)");
    if (flags.lr_warmup_fraction && flags.lr_warmup_iters != 0)
      base::fail("--lr-warmup-fraction and --lr-warmup-iters are mutually exclusive");
  } else if (by_samples) {
    if (flags.lr_decay_iters)
      base::fail("--lr-decay-iters needs iteration-based training (--train-iters)");
    if (flags.lr_warmup_iters != 0)
      base::fail("--lr-warmup-iters needs iteration-based training (--train-iters)");
    if (flags.lr_warmup_fraction && flags.lr_warmup_samples != 0)
      base::fail("--lr-warmup-fraction and --lr-warmup-samples are mutually exclusive");
  } else {
    base::fail("either --train-iters or --train-samples should be provided");
  }

  LrScheduleConfig config;
  config.max_lr = *flags.lr;
  config.min_lr = flags.min_lr;
  config.decay_style = flags.decay_style;
  config.decay_tokens = flags.lr_decay_tokens;
  config.override_lr_scheduler = flags.override_lr_scheduler;
  config.use_checkpoint_lr_scheduler = flags.use_checkpoint_lr_scheduler;
  // Warmup and decay are counted in samples; iterations convert with the final G.
  if (by_iters) {
    config.decay_steps =
        flags.lr_decay_iters.value_or(*flags.train_iters) * flags.global_batch_size;
    config.warmup_steps =
        flags.lr_warmup_fraction
            ? *flags.lr_warmup_fraction * static_cast<double>(config.decay_steps)
            : static_cast<double>(flags.lr_warmup_iters * flags.global_batch_size);
  } else {
    config.decay_steps = flags.lr_decay_samples.value_or(*flags.train_samples);
    config.warmup_steps = flags.lr_warmup_fraction
                              ? *flags.lr_warmup_fraction * static_cast<double>(config.decay_steps)
                              : static_cast<double>(flags.lr_warmup_samples);
  }
  return config;
}

AnnealingLR::AnnealingLR(const LrScheduleConfig& config) : config_(config) {
  if (!(config_.min_lr >= 0.0)) base::fail("--min-lr must be >= 0, got ", shortest(config_.min_lr));
  if (!(config_.max_lr >= config_.min_lr))
    base::fail("--lr (", shortest(config_.max_lr), ") must be >= --min-lr (",
               shortest(config_.min_lr), ")");
  if (config_.decay_steps <= 0)
    base::fail("learning-rate decay steps must be > 0, got ", config_.decay_steps);
  if (!(config_.warmup_steps < static_cast<double>(config_.decay_steps)))
    base::fail("learning-rate warmup (", shortest(config_.warmup_steps),
               " samples) must be shorter than the decay (", config_.decay_steps, " samples)");
  if (config_.decay_tokens && *config_.decay_tokens <= 0)
    base::fail("--lr-decay-tokens must be > 0, got ", *config_.decay_tokens);
  if (config_.override_lr_scheduler && config_.use_checkpoint_lr_scheduler)
    base::fail("--override-lr-scheduler and --use-checkpoint-lr-scheduler are both set");
  step(0, 0);
}

double AnnealingLR::compute(int64_t num_steps, int64_t num_tokens, int64_t warmup_tokens) const {
  const LrScheduleConfig& c = config_;
  const double steps = static_cast<double>(num_steps);
  // Same operation order as upstream so that results are bit-identical.
  if (c.warmup_steps > 0 && steps <= c.warmup_steps) return c.max_lr * steps / c.warmup_steps;
  if (c.decay_style == LrDecayStyle::kConstant) return c.max_lr;

  double decay_ratio = 0.0;
  if (!c.decay_tokens) {
    if (num_steps > c.decay_steps) return c.min_lr;
    decay_ratio = (steps - c.warmup_steps) / (static_cast<double>(c.decay_steps) - c.warmup_steps);
  } else {
    if (num_tokens > *c.decay_tokens) return c.min_lr;
    decay_ratio = static_cast<double>(num_tokens - warmup_tokens) /
                  static_cast<double>(*c.decay_tokens - warmup_tokens);
  }
  if (!(decay_ratio >= 0.0 && decay_ratio <= 1.0))
    base::fail("AnnealingLR: decay ratio ", shortest(decay_ratio), " outside [0, 1] at ", num_steps,
               " samples, ", num_tokens, " tokens");
  const double delta_lr = c.max_lr - c.min_lr;
  const double coeff = c.decay_style == LrDecayStyle::kLinear
                           ? 1.0 - decay_ratio
                           : 0.5 * (std::cos(std::numbers::pi * decay_ratio) + 1.0);
  return c.min_lr + coeff * delta_lr;
}

double AnnealingLR::lr_at(int64_t num_steps, int64_t num_tokens) const {
  return compute(num_steps, num_tokens, warmup_tokens_);
}

void AnnealingLR::step(int64_t increment, int64_t num_tokens) {
  num_tokens_ = num_tokens;
  num_steps_ += increment;
  // Upstream records the token count at the exact end of warmup as a side effect of get_lr; with
  // increments of G the boundary is often never hit and warmup_tokens stays 0.
  if (config_.warmup_steps > 0 && static_cast<double>(num_steps_) == config_.warmup_steps &&
      config_.decay_tokens)
    warmup_tokens_ = num_tokens_;
  lr_ = compute(num_steps_, num_tokens_, warmup_tokens_);
}

LrSchedulerState AnnealingLR::state() const {
  LrSchedulerState s;
  s.max_lr = config_.max_lr;
  s.warmup_steps = config_.warmup_steps;
  s.num_steps = num_steps_;
  s.warmup_tokens = warmup_tokens_;
  s.num_tokens = num_tokens_;
  s.decay_style = std::string(to_string(config_.decay_style));
  s.decay_steps = config_.decay_steps;
  s.min_lr = config_.min_lr;
  return s;
}

namespace {

// upstream _check_and_set, with the values rendered as text for the message.
template <typename T>
T check_and_set(const LrScheduleConfig& c, const T& class_value, const T& saved_value,
                const std::string& class_text, const std::string& saved_text,
                std::string_view name) {
  if (c.override_lr_scheduler) return class_value;
  if (!c.use_checkpoint_lr_scheduler && !(class_value == saved_value))
    base::fail("AnnealingLR: ", name, " is ", class_text, " on the command line but ", saved_text,
               " in the checkpoint (use --override-lr-scheduler or "
               "--use-checkpoint-lr-scheduler)");
  return saved_value;
}

}  // namespace

void AnnealingLR::load_state(const LrSchedulerState& saved) {
  LrScheduleConfig& c = config_;
  c.max_lr = check_and_set(c, c.max_lr, saved.max_lr, shortest(c.max_lr), shortest(saved.max_lr),
                           "learning rate");
  c.min_lr = check_and_set(c, c.min_lr, saved.min_lr, shortest(c.min_lr), shortest(saved.min_lr),
                           "minimum learning rate");
  c.warmup_steps = check_and_set(c, c.warmup_steps, saved.warmup_steps, shortest(c.warmup_steps),
                                 shortest(saved.warmup_steps), "warmup iterations");
  c.decay_steps = check_and_set(c, c.decay_steps, saved.decay_steps, std::to_string(c.decay_steps),
                                std::to_string(saved.decay_steps), "total number of iterations");
  const std::string class_style(to_string(c.decay_style));
  const std::string style = check_and_set(c, class_style, saved.decay_style, class_style,
                                          saved.decay_style, "decay style");
  try {
    c.decay_style = parse_lr_decay_style(style);
  } catch (const base::Error&) {
    base::fail("AnnealingLR: checkpoint has unknown decay style '", style, "'");
  }
  warmup_tokens_ = saved.warmup_tokens;
  // Upstream re-steps from the freshly constructed state (num_steps 0) by the saved count.
  num_steps_ = 0;
  step(saved.num_steps, saved.num_tokens);
}

}  // namespace mds::train
