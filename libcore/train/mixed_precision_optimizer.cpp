#include "train/mixed_precision_optimizer.h"

#include <cmath>
#include <utility>

#include "base/error.h"
#include "config/deepspeed_config.h"
#include "ops/adam.h"
#include "ops/elementwise.h"
#include "train/grad_accumulation.h"

namespace mds::train {
namespace {

using tensor::DType;

DType param_dtype(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return DType::kBFloat16;
    case Precision::kFp16:
      return DType::kFloat16;
    case Precision::kFp32:
      break;
  }
  return DType::kFloat32;
}

// BF16_Optimizer accumulates into fp32; fp16 `.grad` accumulates in fp16.
DType accumulator_dtype(Precision precision) {
  return precision == Precision::kFp16 ? DType::kFloat16 : DType::kFloat32;
}

DType to_dtype(config::CommDataType type) {
  switch (type) {
    case config::CommDataType::kFp16:
      return DType::kFloat16;
    case config::CommDataType::kBf16:
      return DType::kBFloat16;
    case config::CommDataType::kFp32:
      break;
  }
  return DType::kFloat32;
}

void validate(const OptimizerOptions& options) {
  const std::string_view precision = to_string(options.precision);
  if (options.zero_stage < 0 || options.zero_stage > 1) {
    base::fail("zero_optimization.stage ", options.zero_stage,
               " is not supported: the pipeline engine accepts stages 0 and 1");
  }
  if (options.zero_stage == 1 && options.precision == Precision::kBf16) {
    base::fail(
        "bf16 with zero_optimization.stage 1 is not supported (DeepSpeed's pipeline "
        "ReduceGrads raises NotImplementedError); use stage 0, BF16_Optimizer shards "
        "like stage 1");
  }
  if (options.zero_stage == 1 && options.precision == Precision::kFp32) {
    base::fail("zero_optimization.stage 1 needs fp16 or bf16 in mds; fp32 runs use stage 0");
  }
  const bool scaled = options.loss_scaler.rule() != LossScaleRule::kNone;
  if (scaled != (options.precision == Precision::kFp16)) {
    base::fail("optimizer: a ", precision, " run ", scaled ? "cannot use" : "needs",
               " a loss scaler");
  }
  const DType comm = options.communication_dtype;
  if (comm != DType::kFloat32 && comm != DType::kFloat16 && comm != DType::kBFloat16) {
    base::fail("optimizer: communication dtype must be fp32, fp16 or bf16, got ",
               tensor::dtype_name(comm));
  }
  if (!(options.gradient_clipping >= 0.0))
    base::fail("gradient_clipping must be >= 0, got ", options.gradient_clipping);
}

OptimizerOptions validated(OptimizerOptions options) {
  validate(options);
  return options;
}

}  // namespace

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp32:
      break;
  }
  return "fp32";
}

OptimizerOptions optimizer_options_from_config(const config::DeepSpeedConfig& config,
                                               const AdamHyperParams& adam) {
  if (config.fp16.enabled && config.bf16_enabled)
    base::fail(config.source, ": fp16.enabled and bf16.enabled cannot both be true");
  OptimizerOptions options;
  options.precision = config.fp16.enabled   ? Precision::kFp16
                      : config.bf16_enabled ? Precision::kBf16
                                            : Precision::kFp32;
  options.zero_stage = config.zero.stage;
  options.gradient_clipping = config.gradient_clipping;
  options.adam = adam;
  options.communication_dtype = to_dtype(config::effective_communication_data_type(config));
  options.loss_scaler = LossScaler::from_config(config);
  validate(options);
  return options;
}

MixedPrecisionOptimizer::MixedPrecisionOptimizer(const model::ParamTable& table,
                                                 OptimizerOptions options)
    : table_(&table),
      options_(validated(std::move(options))),
      params_(table, param_dtype(options_.precision)),
      exp_avg_(table, DType::kFloat32),
      exp_avg_sq_(table, DType::kFloat32),
      grad_accumulator_(table, accumulator_dtype(options_.precision)),
      micro_grads_(table, DType::kFloat32) {
  if (is_16bit()) {
    master_.emplace(table, DType::kFloat32);
    compute_.emplace(table, DType::kFloat32);
  }
}

const model::ParamBuffer& MixedPrecisionOptimizer::compute() const {
  return compute_ ? *compute_ : params_;
}

const model::ParamBuffer& MixedPrecisionOptimizer::master() const {
  return master_ ? *master_ : params_;
}

void MixedPrecisionOptimizer::initialize(tensor::Tensor initial_params, double initial_lr) {
  if (initialized_) base::fail("optimizer: initialize() called twice");
  if (initial_params.dtype() != DType::kFloat32 ||
      initial_params.numel() != table_->buffer_numel()) {
    base::fail("optimizer: initial parameters must be an fp32 buffer of ", table_->buffer_numel(),
               " elements, got ", tensor::dtype_name(initial_params.dtype()), " of ",
               initial_params.numel());
  }
  for (std::size_t i = 0; i < table_->size(); ++i) {
    const model::ParamSpec& param = (*table_)[i];
    ops::cast(params_.view(i), initial_params.narrow(param.offset, param.local_numel()));
  }
  if (is_16bit()) {
    ops::cast(master_->flat(), params_.flat());
    ops::cast(compute_->flat(), params_.flat());
    // The construction step of BF16_Optimizer, FP16_Optimizer and ZeRO (initialize_optimizer_
    // states): all-zero gradients, masters only.
    ops::fill(micro_grads_.flat(), 0.0f);
    adam_update(*master_, micro_grads_.flat(), initial_lr);
  }
  initialized_ = true;
}

void MixedPrecisionOptimizer::accumulate_micro_batch() {
  accumulate_gradient(grad_accumulator_.flat(), micro_grads_.flat(), params_.dtype());
  ops::fill(micro_grads_.flat(), 0.0f);
}

StepResult MixedPrecisionOptimizer::step(double lr, std::int64_t iteration,
                                         dist::Communicator* data_parallel,
                                         dist::Communicator* model_parallel) {
  if (!initialized_) {
    base::fail("optimizer: step() before initialize() or restore_from_checkpoint()");
  }
  if (data_parallel != nullptr && data_parallel->size() > 1) {
    if (options_.precision != Precision::kFp32) {
      base::fail("optimizer: data-parallel gradient reduction is implemented for fp32 only");
    }
    const tensor::Tensor grads = grad_accumulator_.flat();
    data_parallel->all_reduce(grads, dist::ReduceOp::kSum);
    // DeepSpeed's allreduce_bucket with postscale_gradients (its default): sum, then × 1/D.
    ops::scale(grads, grads, static_cast<float>(1.0 / data_parallel->size()));
  } else {
    // ReduceGrads over a data-parallel group of one rank: only the dtype round trip remains.
    round_through(grad_accumulator_.flat(), options_.communication_dtype);
  }
  switch (options_.precision) {
    case Precision::kBf16:
      return step_bf16(lr, iteration, model_parallel);
    case Precision::kFp16:
      return step_fp16(lr, model_parallel);
    case Precision::kFp32:
      break;
  }
  return step_fp32(lr, model_parallel);
}

StepResult MixedPrecisionOptimizer::step_fp32(double lr, dist::Communicator* model_parallel) {
  StepResult result;
  const tensor::Tensor grads = grad_accumulator_.flat();
  const double clip = options_.gradient_clipping;
  if (clip > 0.0) {
    // The engine's clip_fp32_gradients; an inf/NaN norm gives a NaN factor that is not < 1.
    const double coefficient = clip_coefficient(
        clip, global_grad_norm(*table_, grads, NormRule::kFp32Engine, model_parallel));
    if (coefficient < 1.0) {
      scale_gradients(grads, coefficient);
      result.clipped = true;
    }
  }
  adam_update(params_, grads, lr);
  ops::fill(grads, 0.0f);
  result.adam_step = adam_step_;
  return result;
}

StepResult MixedPrecisionOptimizer::step_bf16(double lr, std::int64_t iteration,
                                              dist::Communicator* model_parallel) {
  StepResult result;
  const tensor::Tensor grads = grad_accumulator_.flat();
  const double norm = global_grad_norm(*table_, grads, NormRule::kBf16, model_parallel);
  last_grad_norm_ = norm;
  if (!(norm > 0.0)) {
    base::fail("gradient norm is ", norm < 0.0 ? "NaN/inf" : "zero", " at iteration ", iteration,
               " (bf16 has no loss scaling to skip the step; BF16_Optimizer asserts norm > 0)");
  }
  const double clip = options_.gradient_clipping;
  if (clip > 0.0) {
    const double coefficient = clip_coefficient(clip, norm);
    if (coefficient < 1.0) {
      scale_gradients(grads, coefficient);
      result.clipped = true;
    }
  }
  adam_update(*master_, grads, lr);
  publish_master();
  ops::fill(grads, 0.0f);
  result.grad_norm = norm;
  result.adam_step = adam_step_;
  return result;
}

StepResult MixedPrecisionOptimizer::step_fp16(double lr, dist::Communicator* model_parallel) {
  StepResult result;
  LossScaler& scaler = options_.loss_scaler;
  const tensor::Tensor accumulated = grad_accumulator_.flat();
  // Every rank of the replica skips together (all-reduce MAX of the flag, training.md §4.5).
  std::int64_t overflow_flag = has_inf_or_nan(accumulated) ? 1 : 0;
  if (model_parallel != nullptr && model_parallel->size() > 1) {
    model_parallel->all_reduce(
        tensor::Tensor(&overflow_flag, tensor::DType::kInt64, tensor::Shape{1}),
        dist::ReduceOp::kMax);
  }
  const bool overflow = overflow_flag != 0;
  const double prev_scale = scaler.scale();
  // Both wrappers update the scale before unscaling, so a step that doubles the scale divides its
  // gradients by the doubled one.
  const bool skip = scaler.update(overflow);
  const double scale = scaler.scale();
  result.loss_scale = scale;
  if (skip) {
    ops::fill(accumulated, 0.0f);
    result.skipped = true;
    result.grad_norm = last_grad_norm_;
    result.adam_step = adam_step_;
    return result;
  }

  const tensor::Tensor grads = micro_grads_.flat();  // fp32 scratch
  ops::cast(grads, accumulated);
  ops::fill(accumulated, 0.0f);
  const double clip = options_.gradient_clipping;
  double scaled_norm = 0.0;
  if (options_.zero_stage == 1) {
    scaled_norm = global_grad_norm(*table_, grads, NormRule::kZero, model_parallel);
    last_grad_norm_ = scaled_norm / prev_scale;
  } else {
    const double norm = global_grad_norm(*table_, grads, NormRule::kFp16Optimizer, model_parallel);
    scaled_norm = std::sqrt(norm * norm);  // get_global_norm([norm])
    last_grad_norm_ = scaled_norm / scale;
  }
  const double combined = combined_unscale_factor(scale, scaled_norm, clip);
  result.clipped = combined != scale;
  scale_gradients(grads, 1.0 / combined);
  adam_update(*master_, grads, lr);
  publish_master();
  ops::fill(grads, 0.0f);
  result.grad_norm = last_grad_norm_;
  result.adam_step = adam_step_;
  return result;
}

void MixedPrecisionOptimizer::adam_update(const model::ParamBuffer& weights, tensor::Tensor grads,
                                          double lr) {
  ++adam_step_;
  const AdamHyperParams& adam = options_.adam;
  for (int g = 0; g < model::kNumDecayGroups; ++g) {
    const auto group = static_cast<model::DecayGroup>(g);
    const std::int64_t begin = table_->group_begin(group);
    const std::int64_t count = table_->group_end(group) - begin;
    if (count == 0) continue;  // DeepSpeed drops empty groups
    ops::AdamWConfig config;
    config.lr = static_cast<float>(lr);
    config.beta1 = static_cast<float>(adam.beta1);
    config.beta2 = static_cast<float>(adam.beta2);
    config.eps = static_cast<float>(adam.eps);
    config.weight_decay =
        group == model::DecayGroup::kNoDecay ? 0.0f : static_cast<float>(adam.weight_decay);
    ops::adamw_step(weights.flat().narrow(begin, count), grads.narrow(begin, count),
                    exp_avg_.flat().narrow(begin, count), exp_avg_sq_.flat().narrow(begin, count),
                    config, adam_step_);
  }
}

void MixedPrecisionOptimizer::publish_master() {
  ops::cast(params_.flat(), master_->flat());
  ops::cast(compute_->flat(), params_.flat());
}

void MixedPrecisionOptimizer::set_adam_step(std::int64_t step) {
  if (step < 0) base::fail("optimizer: Adam step must be >= 0, got ", step);
  adam_step_ = step;
}

void MixedPrecisionOptimizer::load_loss_scaler_state(const LossScalerState& state) {
  options_.loss_scaler.load_state(state);
}

void MixedPrecisionOptimizer::restore_from_checkpoint(RestoreSource source) {
  if (is_16bit()) {
    switch (source) {
      case RestoreSource::kParamsFromMaster:
        ops::cast(params_.flat(), master_->flat());
        break;
      case RestoreSource::kMasterFromParams:
        ops::cast(master_->flat(), params_.flat());
        break;
      case RestoreSource::kAsLoaded:
        break;
    }
    ops::cast(compute_->flat(), params_.flat());
  }
  ops::fill(grad_accumulator_.flat(), 0.0f);
  ops::fill(micro_grads_.flat(), 0.0f);
  initialized_ = true;
}

}  // namespace mds::train
