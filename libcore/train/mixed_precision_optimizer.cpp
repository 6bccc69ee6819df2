#include "train/mixed_precision_optimizer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/error.h"
#include "config/deepspeed_config.h"
#include "ops/adam.h"
#include "ops/elementwise.h"
#include "tensor/device_memory.h"
#include "train/grad_accumulation.h"
#include "train/zero_partition.h"

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
  if (options.zero_stage < 0 || options.zero_stage > 2) {
    base::fail("zero_optimization.stage ", options.zero_stage,
               " is not supported: mds implements stages 0, 1 and 2");
  }
  if (options.zero_stage >= 1 && options.precision == Precision::kBf16) {
    base::fail("bf16 with zero_optimization.stage ", options.zero_stage,
               " is not supported (DeepSpeed's pipeline ReduceGrads raises "
               "NotImplementedError); use stage 0: BF16_Optimizer already partitions the fp32 "
               "master and Adam state like stage 1");
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

tensor::Device device_of(const ops::DeviceContext* device) {
  return device != nullptr ? device->device() : tensor::Device{};
}

bool is_partitioned(const OptimizerOptions& options) {
  return options.precision == Precision::kBf16 || options.zero_stage >= 1;
}

std::int64_t ranks_of(dist::Communicator* group) {
  return group != nullptr ? group->size() : 1;
}

// Elements of the micro-batch gradient buffer: the table's, or a partitioned step's fp32
// gradient partitions where those are more (padding can make them a few elements longer at D = 1).
std::int64_t micro_grads_capacity(const model::ParamTable& table, const OptimizerOptions& options,
                                  dist::Communicator* data_parallel) {
  if (!is_partitioned(options)) return table.buffer_numel();
  return std::max(table.buffer_numel(),
                  ZeroLayout(table, ranks_of(data_parallel)).partition_numel());
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
  options.overlap_reduction = config::effective_overlap_comm(config);
  validate(options);
  return options;
}

MixedPrecisionOptimizer::MixedPrecisionOptimizer(const model::ParamTable& table,
                                                 OptimizerOptions options,
                                                 dist::Communicator* data_parallel,
                                                 dist::Communicator* model_parallel,
                                                 const ops::DeviceContext* device)
    : table_(&table),
      options_(validated(std::move(options))),
      data_parallel_(data_parallel != nullptr && data_parallel->size() > 1 ? data_parallel
                                                                           : nullptr),
      model_parallel_(model_parallel != nullptr && model_parallel->size() > 1 ? model_parallel
                                                                              : nullptr),
      device_(device),
      params_(table, param_dtype(options_.precision), device_of(device)),
      staging_(options_.collective_chunk_numel, device_of(device)),
      micro_grads_(table, DType::kFloat32, device_of(device),
                   micro_grads_capacity(table, options_, data_parallel_)) {
  const tensor::Device where = params_.flat().device();
  const DType accumulator = accumulator_dtype(options_.precision);
  if (is_partitioned(options_)) {
    shard_.emplace(table, data_parallel_, staging_, device_);
  } else {
    exp_avg_.emplace(table, DType::kFloat32, where);
    exp_avg_sq_.emplace(table, DType::kFloat32, where);
    if (options_.precision == Precision::kFp16) master_.emplace(table, DType::kFloat32, where);
  }
  if (is_16bit() && options_.fp32_compute_copy) compute_.emplace(table, DType::kFloat32, where);
  if (options_.zero_stage < 2) grad_accumulator_.emplace(table, accumulator, where);
  if (context().is_cuda()) {
    host_.emplace(HostState{model::ParamBuffer(table, params_.flat().dtype()),
                            HostCopy(master_on_device()), HostCopy(exp_avg_on_device()),
                            HostCopy(exp_avg_sq_on_device())});
  }
  if (options_.zero_stage == 2) {
    const std::int64_t n = shard_->layout().partition_numel();
    partition_accumulator_buffer_ = tensor::Buffer(
        static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * tensor::dtype_size(accumulator),
        where);
    partition_accumulator_ = partition_accumulator_buffer_.as(accumulator, tensor::Shape{n});
  }
  if (overlaps_reduction() && options_.zero_stage <= 1) {
    overlap_.emplace(table, staging_.all_reduce_chunk(dp_size()));
  } else if (overlaps_reduction()) {
    const std::int64_t chunk = zero_chunk_numel(shard_->layout(), staging_);
    owners_.emplace(table, *shard_, *data_parallel_, staging_, context(),
                    options_.communication_dtype, chunk, kOverlapSlots);
    // The widened slot its owners' pieces go through, at the size the memory plan gives it.
    if (options_.communication_dtype != DType::kFloat32) {
      staging_.get(CollectiveStaging::Slot::kWidened, DType::kFloat32, chunk);
    }
  }
}

const model::ParamBuffer& MixedPrecisionOptimizer::compute() const {
  if (compute_) return *compute_;
  if (is_16bit()) {
    base::fail("optimizer: this ", to_string(options_.precision),
               " optimizer keeps no fp32 compute copy (fp32_compute_copy is off: its model "
               "computes with 16-bit activations from weights())");
  }
  return params_;
}

const ZeroShard& MixedPrecisionOptimizer::shard() const {
  if (!shard_)
    base::fail("optimizer: the ", to_string(options_.precision), " ZeRO-", options_.zero_stage,
               " state is not partitioned");
  return *shard_;
}

MixedPrecisionOptimizer::HostCopy::HostCopy(tensor::Tensor like) {
  if (!like.defined()) return;
  buffer = tensor::Buffer(static_cast<std::size_t>(std::max<std::int64_t>(like.numel(), 1)) *
                              tensor::dtype_size(like.dtype()),
                          tensor::Device{});
  view = buffer.as(like.dtype(), like.shape());
}

tensor::Tensor MixedPrecisionOptimizer::master_on_device() const {
  if (shard_) return shard_->master();
  return master_ ? master_->flat() : tensor::Tensor{};
}

tensor::Tensor MixedPrecisionOptimizer::exp_avg_on_device() const {
  return shard_ ? shard_->exp_avg() : exp_avg_->flat();
}

tensor::Tensor MixedPrecisionOptimizer::exp_avg_sq_on_device() const {
  return shard_ ? shard_->exp_avg_sq() : exp_avg_sq_->flat();
}

tensor::Tensor MixedPrecisionOptimizer::master() const {
  if (host_ && host_->master.view.defined()) return host_->master.view;
  const tensor::Tensor separate = master_on_device();
  return separate.defined() ? separate : params().flat();
}

tensor::Tensor MixedPrecisionOptimizer::exp_avg() const {
  return host_ ? host_->exp_avg.view : exp_avg_on_device();
}

tensor::Tensor MixedPrecisionOptimizer::exp_avg_sq() const {
  return host_ ? host_->exp_avg_sq.view : exp_avg_sq_on_device();
}

void MixedPrecisionOptimizer::copy_state_to_host() {
  if (!host_) return;
  tensor::copy(host_->params.flat(), params_.flat());
  if (host_->master.view.defined()) tensor::copy(host_->master.view, master_on_device());
  tensor::copy(host_->exp_avg.view, exp_avg_on_device());
  tensor::copy(host_->exp_avg_sq.view, exp_avg_sq_on_device());
}

void MixedPrecisionOptimizer::copy_state_to_device() {
  if (!host_) return;
  tensor::copy(params_.flat(), host_->params.flat());
  if (host_->master.view.defined()) tensor::copy(master_on_device(), host_->master.view);
  tensor::copy(exp_avg_on_device(), host_->exp_avg.view);
  tensor::copy(exp_avg_sq_on_device(), host_->exp_avg_sq.view);
}

tensor::Tensor MixedPrecisionOptimizer::grad_accumulator() const {
  return grad_accumulator_ ? grad_accumulator_->flat() : partition_accumulator_;
}

std::int64_t MixedPrecisionOptimizer::dp_size() const {
  return ranks_of(data_parallel_);
}

tensor::Tensor MixedPrecisionOptimizer::step_gradients() const {
  return micro_grads_.scratch(shard_->layout().partition_numel());
}

ShardAdamStep MixedPrecisionOptimizer::shard_adam_step(double lr) const {
  const AdamHyperParams& adam = options_.adam;
  return {lr, adam.beta1, adam.beta2, adam.eps, adam.weight_decay, adam_step_};
}

std::vector<BufferBytes> MixedPrecisionOptimizer::memory() const {
  std::vector<BufferBytes> buffers;
  const auto add = [&buffers](std::string_view name, std::size_t bytes) {
    if (bytes > 0) buffers.push_back({name, bytes});
  };
  add("weights", params_.bytes());
  add("compute", compute_ ? compute_->bytes() : 0);
  add("micro_grads", micro_grads_.bytes());
  add("grad_accumulator", grad_accumulator_ ? grad_accumulator_->bytes() : 0);
  add("partition_accumulator", partition_accumulator_buffer_.bytes());
  add("master", shard_ ? shard_->master().bytes() : master_ ? master_->bytes() : 0);
  add("exp_avg", shard_ ? shard_->exp_avg().bytes() : exp_avg_->bytes());
  add("exp_avg_sq", shard_ ? shard_->exp_avg_sq().bytes() : exp_avg_sq_->bytes());
  add("staging", staging_.bytes());
  add("overlap_staging", owners_ ? owners_->bytes() : 0);
  return buffers;
}

void MixedPrecisionOptimizer::initialize(tensor::Tensor initial_params, double initial_lr) {
  if (initial_params.dtype() != DType::kFloat32 ||
      initial_params.numel() != table_->buffer_numel()) {
    base::fail("optimizer: initial parameters must be an fp32 buffer of ", table_->buffer_numel(),
               " elements, got ", tensor::dtype_name(initial_params.dtype()), " of ",
               initial_params.numel());
  }
  initialize_with(
      [&](const model::ParamBuffer& fp32) {
        for (std::size_t i = 0; i < table_->size(); ++i) {
          const model::ParamSpec& param = (*table_)[i];
          ops::cast(fp32.view(i), initial_params.narrow(param.offset, param.local_numel()));
        }
      },
      initial_lr);
}

void MixedPrecisionOptimizer::initialize_with(
    const std::function<void(const model::ParamBuffer&)>& write_initial, double initial_lr) {
  if (initialized_) base::fail("optimizer: initialize() called twice");
  if (host_) {
    // On a device the values are written into a host buffer, rounded into the host view of the
    // weights, and copied over whole.
    const model::ParamBuffer initial(*table_, DType::kFloat32);
    write_initial(initial);
    for (std::size_t i = 0; i < table_->size(); ++i) ops::cast(params().view(i), initial.view(i));
    copy_state_to_device();
  } else if (!is_16bit() || compute_) {
    // On the host into the fp32 buffer the model reads (fp32: the weights themselves), from which
    // 16-bit weights are rounded parameter by parameter.
    write_initial(compute());
    if (compute_) {
      for (std::size_t i = 0; i < table_->size(); ++i)
        ops::cast(params_.view(i), compute_->view(i));
    }
  } else {
    // 16-bit without a compute copy: the micro-batch gradient buffer (fp32, table layout, zero
    // until the first backward) lends itself, and is zero again afterwards.
    write_initial(micro_grads_);
    for (std::size_t i = 0; i < table_->size(); ++i)
      ops::cast(params_.view(i), micro_grads_.view(i));
    ops::fill(context(), micro_grads_.flat(), 0.0f);
  }
  if (compute_) ops::cast(context(), compute_->flat(), params_.flat());
  // The construction step of BF16_Optimizer, FP16_Optimizer and ZeRO (initialize_optimizer_
  // states): all-zero gradients, masters only. The bare fp32 optimizer takes none.
  if (shard_) {
    shard_->master_from_params(params_.flat());
    const tensor::Tensor grads = step_gradients();
    ops::fill(context(), grads, 0.0f);
    ++adam_step_;
    shard_->adam_step(grads, shard_adam_step(initial_lr));
  } else if (master_) {
    ops::cast(context(), master_->flat(), params_.flat());
    ops::fill(context(), micro_grads_.flat(), 0.0f);
    adam_update(*master_, micro_grads_.flat(), initial_lr);
  }
  initialized_ = true;
}

void MixedPrecisionOptimizer::accumulate_micro_batch(bool last) {
  const bool overlapping = overlap_ && overlap_->in_progress();
  if (overlapping && !last) {
    base::fail(
        "optimizer: gradients_ready() was called during a micro-batch that is not the "
        "step's last (accumulate_micro_batch(last = true) must follow it)");
  }
  if (owners_) {
    if (!owners_->in_progress()) begin_reduction_to_owners();
    owners_->finish();
  } else if (options_.zero_stage == 2) {
    shard_->reduce_scatter_into(micro_grads_.flat(), options_.communication_dtype,
                                partition_accumulator_, params_.dtype());
  } else if (last && overlap_) {
    // The rest of the last micro-batch; micro_grads_ stages reductions until step() finishes them.
    if (!overlapping) begin_overlapped_reduction();
    overlap_->flush();
    accumulator_fresh_ = false;
    return;
  } else {
    ops::AccumulateSteps steps;
    steps.fresh = accumulator_fresh_;
    if (last && !is_zero() && data_parallel_ == nullptr)
      steps.round_through = single_rank_rounding();
    accumulate_gradient(context(), grad_accumulator_->flat(), micro_grads_.flat(), params_.dtype(),
                        steps);
    accumulator_fresh_ = false;
    accumulator_rounded_ = steps.round_through != DType::kFloat32;
  }
  zero_micro_grads(micro_grads_.flat());
}

bool MixedPrecisionOptimizer::overlaps_reduction() const {
  return options_.overlap_reduction && data_parallel_ != nullptr;
}

bool MixedPrecisionOptimizer::wants_gradients_ready(bool last_micro_batch) const {
  return overlaps_reduction() && (last_micro_batch || options_.zero_stage == 2);
}

void MixedPrecisionOptimizer::reduce_after_tied_gradient(std::size_t param) {
  // Stage 2 reduces over DP before ReduceTiedGrads anyway.
  if (overlap_) overlap_->hold(param);
}

void MixedPrecisionOptimizer::gradients_ready(std::span<const std::size_t> params) {
  if (owners_) {
    if (!owners_->in_progress()) begin_reduction_to_owners();
    owners_->ready(params);
  } else if (overlap_) {
    if (!overlap_->in_progress()) begin_overlapped_reduction();
    overlap_->ready(params);
  }
}

void MixedPrecisionOptimizer::begin_reduction_to_owners() {
  owners_->begin(micro_grads_.flat(), partition_accumulator_, params_.dtype());
}

void MixedPrecisionOptimizer::begin_overlapped_reduction() {
  OverlappedAllReduce::Step step;
  step.ctx = &context();
  step.accumulator = grad_accumulator_->flat();
  step.micro = micro_grads_.flat();
  step.grad_dtype = params_.dtype();
  step.comm = options_.communication_dtype;
  step.fresh = accumulator_fresh_;
  step.group = data_parallel_;
  step.divide_first = is_zero();
  overlap_->begin(step);
}

DType MixedPrecisionOptimizer::single_rank_rounding() const {
  // train::round_through's no-ops: fp32, or the gradients' own dtype.
  const DType comm = options_.communication_dtype;
  return comm == grad_accumulator_->dtype() ? DType::kFloat32 : comm;
}

void MixedPrecisionOptimizer::release_accumulator() {
  accumulator_fresh_ = true;
  accumulator_rounded_ = false;
}

void MixedPrecisionOptimizer::zero_micro_grads(tensor::Tensor memory) const {
  if (!options_.micro_grads_written_whole) ops::fill(context(), memory, 0.0f);
}

void MixedPrecisionOptimizer::reduce_tied_gradient(std::size_t param,
                                                   dist::Communicator& embedding) {
  if (grad_accumulator_) {
    embedding.all_reduce(grad_accumulator_->view(param), dist::ReduceOp::kSum);
    if (overlap_ && overlap_->in_progress()) overlap_->release(param);
    return;
  }
  // Stage 2: the gradient is already reduced and partitioned over DP.
  shard_->all_reduce_parameter(partition_accumulator_, param, embedding);
}

StepResult MixedPrecisionOptimizer::step(double lr, std::int64_t iteration) {
  if (!initialized_) {
    base::fail("optimizer: step() before initialize() or restore_from_checkpoint()");
  }
  const bool overlapped = overlap_ && overlap_->in_progress();
  if (overlapped) {
    overlap_->finish();
    zero_micro_grads(micro_grads_.flat());
  }
  // A step before any micro-batch has zero gradients.
  if (grad_accumulator_ && accumulator_fresh_) {
    ops::fill(context(), grad_accumulator_->flat(), 0.0f);
    accumulator_fresh_ = false;
  }
  if (is_zero()) return step_zero(lr, overlapped);
  if (!overlapped) all_reduce_gradients();
  switch (options_.precision) {
    case Precision::kBf16:
      return step_bf16(lr, iteration);
    case Precision::kFp16:
      return step_fp16(lr);
    case Precision::kFp32:
      break;
  }
  return step_fp32(lr);
}

void MixedPrecisionOptimizer::all_reduce_gradients() {
  const tensor::Tensor grads = grad_accumulator_->flat();
  const DType comm = options_.communication_dtype;
  if (data_parallel_ == nullptr) {
    // A data-parallel group of one rank: only the dtype round trip remains (unless the last
    // accumulate did it).
    if (!accumulator_rounded_) train::round_through(context(), grads, comm);
    return;
  }
  const double inverse = 1.0 / static_cast<double>(dp_size());
  for_each_chunk(grads.numel(), staging_.all_reduce_chunk(dp_size()), [&](const Chunk& chunk) {
    const tensor::Tensor part = grads.narrow(chunk.offset, chunk.numel);
    // In place when the gradients are in the communication dtype, else through the staging.
    const bool staged = comm != grads.dtype();
    const tensor::Tensor reduced =
        staged ? staging_.get(CollectiveStaging::Slot::kCollective, comm, chunk.numel) : part;
    if (staged) ops::cast(context(), reduced, part);
    data_parallel_->all_reduce(reduced, dist::ReduceOp::kSum);
    // DeepSpeed's allreduce_bucket with postscale_gradients (its default): sum, then × 1/D in
    // the communication dtype.
    scale_in_dtype(context(), reduced, inverse);
    if (staged) ops::cast(context(), part, reduced);
  });
}

bool MixedPrecisionOptimizer::any_overflow(tensor::Tensor grads, bool partitioned_grads) const {
  std::int64_t flag = train::has_inf_or_nan(context(), grads) ? 1 : 0;
  // Whole all-reduced gradients are equal on every DP rank: only ZeRO's partitions need DP.
  for (dist::Communicator* group :
       {partitioned_grads ? data_parallel_ : nullptr, model_parallel_}) {
    if (group == nullptr) continue;
    group->all_reduce(tensor::Tensor(&flag, DType::kInt64, tensor::Shape{1}), dist::ReduceOp::kMax);
  }
  return flag != 0;
}

StepResult MixedPrecisionOptimizer::step_fp32(double lr) {
  StepResult result;
  const tensor::Tensor grads = grad_accumulator_->flat();
  const double clip = options_.gradient_clipping;
  if (clip > 0.0) {
    // The engine's clip_fp32_gradients; an inf/NaN norm gives a NaN factor that is not < 1.
    const double coefficient = clip_coefficient(
        clip, global_grad_norm(context(), *table_, grads, NormRule::kFp32Engine, model_parallel_));
    if (coefficient < 1.0) {
      scale_gradients(context(), grads, coefficient);
      result.clipped = true;
    }
  }
  adam_update(params_, grads, lr);
  release_accumulator();
  result.adam_step = adam_step_;
  return result;
}

StepResult MixedPrecisionOptimizer::step_bf16(double lr, std::int64_t iteration) {
  StepResult result;
  const tensor::Tensor grads = grad_accumulator_->flat();
  // The gradients are whole on every rank: the norm needs only the model-parallel reduction.
  const double norm = global_grad_norm(context(), *table_, grads, NormRule::kBf16, model_parallel_);
  last_grad_norm_ = norm;
  if (!(norm > 0.0)) {
    base::fail("gradient norm is ", norm < 0.0 ? "NaN/inf" : "zero", " at iteration ", iteration,
               " (bf16 has no loss scaling to skip the step; BF16_Optimizer asserts norm > 0)");
  }
  // Clipping scales the gradients as they are copied into the partitions (the accumulator is
  // released next): scale_gradients' products, one pass fewer.
  float clip_factor = 1.0f;
  const double clip = options_.gradient_clipping;
  if (clip > 0.0) {
    const double coefficient = clip_coefficient(clip, norm);
    if (coefficient < 1.0) {
      clip_factor = static_cast<float>(coefficient);
      result.clipped = true;
    }
  }
  const tensor::Tensor partitions = step_gradients();
  shard_->grads_from_full(grads, partitions, clip_factor);
  release_accumulator();
  ++adam_step_;
  shard_->adam_step_and_publish(partitions, shard_adam_step(lr), params_.flat());
  refresh_compute();
  zero_micro_grads(partitions);
  result.grad_norm = norm;
  result.adam_step = adam_step_;
  return result;
}

StepResult MixedPrecisionOptimizer::step_fp16(double lr) {
  StepResult result;
  LossScaler& scaler = options_.loss_scaler;
  const tensor::Tensor accumulated = grad_accumulator_->flat();
  // Every rank of the replica skips together (all-reduce MAX of the flag, training.md §4.5).
  const bool overflow = any_overflow(accumulated, false);
  // Both wrappers update the scale before unscaling, so a step that doubles the scale divides its
  // gradients by the doubled one.
  const bool skip = scaler.update(overflow);
  const double scale = scaler.scale();
  result.loss_scale = scale;
  if (skip) {
    release_accumulator();
    result.skipped = true;
    result.grad_norm = last_grad_norm_;
    result.adam_step = adam_step_;
    return result;
  }
  const tensor::Tensor grads = micro_grads_.flat();  // fp32 scratch
  ops::cast(context(), grads, accumulated);
  release_accumulator();
  const double norm =
      global_grad_norm(context(), *table_, grads, NormRule::kFp16Optimizer, model_parallel_);
  const double scaled_norm = std::sqrt(norm * norm);  // get_global_norm([norm])
  last_grad_norm_ = scaled_norm / scale;
  const double combined = combined_unscale_factor(scale, scaled_norm, options_.gradient_clipping);
  result.clipped = combined != scale;
  scale_gradients(context(), grads, 1.0 / combined);
  // The master step and the master → params copy in one pass.
  adam_update(*master_, grads, lr, params_.flat());
  refresh_compute();
  zero_micro_grads(grads);
  result.grad_norm = last_grad_norm_;
  result.adam_step = adam_step_;
  return result;
}

double MixedPrecisionOptimizer::zero_grad_norm(tensor::Tensor grads) const {
  // One norm per group (get_grad_norm_direct): the host sum goes through an fp32 tensor that is
  // all-reduced over DP, then over the model-parallel group; then the groups combine.
  double total = 0.0;
  for (std::size_t g = 0; g < shard_->layout().size(); ++g) {
    float sum = static_cast<float>(shard_->group_sum_of_squares(grads, g));
    for (dist::Communicator* group : {data_parallel_, model_parallel_}) {
      if (group == nullptr) continue;
      group->all_reduce(tensor::Tensor(&sum, DType::kFloat32, tensor::Shape{1}),
                        dist::ReduceOp::kSum);
    }
    double norm = std::pow(static_cast<double>(sum), 0.5);
    if (!std::isfinite(norm)) norm = -1.0;
    total += norm * norm;
  }
  return std::sqrt(total);
}

StepResult MixedPrecisionOptimizer::step_zero(double lr, bool reduced_whole) {
  StepResult result;
  const tensor::Tensor grads = step_gradients();
  // Stage 1 reduces its whole accumulator now into the fp32 partitions, through a fresh
  // accumulator chunk by chunk, or (overlapped) takes them from the all-reduced accumulator;
  // stage 2's partitions hold what every micro-batch added.
  const bool stage1 = options_.zero_stage == 1;
  if (stage1 && reduced_whole) {
    shard_->grads_from_full(grad_accumulator_->flat(), grads);
    release_accumulator();
  } else if (stage1) {
    shard_->reduce_scatter_fresh(grad_accumulator_->flat(), options_.communication_dtype,
                                 grad_accumulator_->dtype(), params_.dtype(), grads);
    release_accumulator();
  }
  const tensor::Tensor reduced = stage1 ? grads : partition_accumulator_;
  LossScaler& scaler = options_.loss_scaler;
  const double prev_scale = scaler.scale();
  // ZeRO checks its own partition, then agrees over DP and model parallel. An fp32 run has a
  // static scale of 1 but still skips a non-finite step, as DeepSpeedZeroOptimizer does. (The
  // widened fp32 partition of stage 1 is non-finite exactly where its accumulator was.)
  const bool overflow = any_overflow(reduced, true);
  scaler.update(overflow);
  const double scale = scaler.scale();
  result.loss_scale = scale;
  if (overflow) {
    ops::fill(context(), reduced, 0.0f);
    result.skipped = true;
    result.grad_norm = last_grad_norm_;
    result.adam_step = adam_step_;
    return result;
  }
  if (!stage1) {
    ops::cast(context(), grads, partition_accumulator_);
    ops::fill(context(), partition_accumulator_, 0.0f);
  }
  const double scaled_norm = zero_grad_norm(grads);
  last_grad_norm_ = scaled_norm / prev_scale;
  const double combined = combined_unscale_factor(scale, scaled_norm, options_.gradient_clipping);
  result.clipped = combined != scale;
  scale_gradients(context(), grads, 1.0 / combined);
  ++adam_step_;
  shard_->adam_step_and_publish(grads, shard_adam_step(lr), params_.flat());
  refresh_compute();
  zero_micro_grads(grads);
  result.grad_norm = last_grad_norm_;
  result.adam_step = adam_step_;
  return result;
}

void MixedPrecisionOptimizer::adam_update(const model::ParamBuffer& weights, tensor::Tensor grads,
                                          double lr, tensor::Tensor rounded) {
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
    const auto part = [&](tensor::Tensor flat) { return flat.narrow(begin, count); };
    if (rounded.defined()) {
      ops::adamw_step_and_cast(context(), part(weights.flat()), part(grads), part(exp_avg_->flat()),
                               part(exp_avg_sq_->flat()), config, adam_step_, part(rounded));
    } else {
      ops::adamw_step(context(), part(weights.flat()), part(grads), part(exp_avg_->flat()),
                      part(exp_avg_sq_->flat()), config, adam_step_);
    }
  }
}

void MixedPrecisionOptimizer::publish_master() {
  if (shard_) {
    shard_->publish(params_.flat());
  } else {
    ops::cast(context(), params_.flat(), master_->flat());
  }
  refresh_compute();
}

void MixedPrecisionOptimizer::refresh_compute() {
  if (compute_) ops::cast(context(), compute_->flat(), params_.flat());
}

void MixedPrecisionOptimizer::set_adam_step(std::int64_t step) {
  if (step < 0) base::fail("optimizer: Adam step must be >= 0, got ", step);
  adam_step_ = step;
}

void MixedPrecisionOptimizer::load_loss_scaler_state(const LossScalerState& state) {
  options_.loss_scaler.load_state(state);
}

void MixedPrecisionOptimizer::restore_from_checkpoint(RestoreSource source) {
  copy_state_to_device();
  switch (source) {
    case RestoreSource::kParamsFromMaster:
      // Every rank holds only its partition of the masters: publishing gathers the rest.
      if (shard_ || master_) publish_master();
      break;
    case RestoreSource::kMasterFromParams:
      if (shard_) shard_->master_from_params(params_.flat());
      if (master_) ops::cast(context(), master_->flat(), params_.flat());
      break;
    case RestoreSource::kAsLoaded:
      break;
  }
  refresh_compute();
  // The table-layout accumulator starts afresh with the next micro-batch; stage 2's partitions
  // are added into.
  if (grad_accumulator_) {
    release_accumulator();
  } else {
    ops::fill(context(), partition_accumulator_, 0.0f);
  }
  ops::fill(context(), micro_grads_.scratch(micro_grads_.capacity_numel()), 0.0f);
  initialized_ = true;
}

}  // namespace mds::train
