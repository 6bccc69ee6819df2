#include "train/trainer.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/stop_signal.h"
#include "model/init.h"
#include "ops/gradients.h"

namespace mds::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

FlopsModel flops_model(const TrainerOptions& options) {
  FlopsModel flops;
  const model::GptConfig& config = options.model.config;
  flops.seq_length = config.seq_length;
  flops.num_layers = config.num_layers;
  flops.hidden_size = config.hidden_size;
  flops.padded_vocab_size = config.padded_vocab_size;
  flops.checkpoint_activations = options.model.checkpoint_activations;
  flops.glu_activation = config.glu;
  return flops;
}

// The parameters upstream's get_parameters_in_billions(exclude_embeddings=True) counts: all but
// the word and position embedding tables, of the whole model whatever this rank's stage.
double non_embedding_parameters_in_billions(model::GptConfig config) {
  config.stage_first_spec = 0;
  config.stage_end_spec = -1;
  const model::ParamTable table = model::ParamTable::build(config);
  std::int64_t count = 0;
  for (const model::ParamSpec& spec : table.params()) {
    if (spec.tied_replica) continue;
    if (spec.layer == model::GptConfig::kEmbeddingSpec) continue;
    count += spec.full_numel();
  }
  return static_cast<double>(count) / 1e9;
}

// Views of a loader's arrays in the model's layout.
model::MicroBatch view_of(data::MicroBatchArrays& arrays) {
  const tensor::Shape shape{arrays.batch_size, arrays.seq_length};
  model::MicroBatch batch;
  batch.tokens = tensor::Tensor(arrays.tokens.data(), tensor::DType::kInt64, shape);
  batch.labels = tensor::Tensor(arrays.labels.data(), tensor::DType::kInt64, shape);
  batch.loss_mask = tensor::Tensor(arrays.loss_mask.data(), tensor::DType::kFloat32, shape);
  batch.position_ids = tensor::Tensor(arrays.position_ids.data(), tensor::DType::kInt64, shape);
  return batch;
}

bool several(const dist::Communicator* group) {
  return group != nullptr && group->size() > 1;
}

// Micro-batches a stage keeps in flight: the 1F1B buffers for any M (max(2, min(P − k, M)) ≤
// max(2, P − k)), which also covers the inference schedule's 2.
int pipe_buffers(const TrainerOptions& options) {
  if (!several(options.pipeline)) return 1;
  return static_cast<int>(std::max<std::int64_t>(
      kInferenceBuffers, options.pipeline->size() - options.pipeline->rank()));
}

// options.model with the activation dtype that options.activations picks; the optimizer keeps an
// fp32 compute copy of 16-bit weights only for a model that computes in fp32 from it, and knows
// how the model writes its gradients.
TrainerOptions resolved(TrainerOptions options) {
  options.model.activation_dtype =
      activation_dtype(options.activations, options.optimizer.precision, options.device);
  options.optimizer.fp32_compute_copy = options.model.activation_dtype == tensor::DType::kFloat32;
  // The model writes every micro-batch's gradient whole (GptModel's default GradientWrite).
  options.optimizer.micro_grads_written_whole = true;
  return options;
}

// The run's device context, with its GEMM algorithm choices before any GEMM runs.
ops::DeviceContext device_context_of(const TrainerOptions& options) {
  ops::DeviceContext context(options.device, options.fp32_matmul);
  if (!options.gemm_tuning_file.empty()) context.tune_gemms(options.gemm_tuning_file);
  if (options.time_kernel_shapes) context.time_kernel_shapes();
  return context;
}

}  // namespace

tensor::DType activation_dtype(ActivationPrecision choice, Precision precision,
                               tensor::Device device) {
  const bool sixteen =
      choice == ActivationPrecision::kParams ||
      (choice == ActivationPrecision::kAuto && device.kind == tensor::DeviceKind::kCuda);
  if (!sixteen) return tensor::DType::kFloat32;
  switch (precision) {
    case Precision::kBf16:
      return tensor::DType::kBFloat16;
    case Precision::kFp16:
      return tensor::DType::kFloat16;
    case Precision::kFp32:
      break;
  }
  return tensor::DType::kFloat32;
}

Trainer::Trainer(TrainerOptions options, const model::ParamTable& table,
                 data::TrainValidTestDatasets data, TrainingOutputs outputs)
    : options_(resolved(std::move(options))),
      table_(table),
      data_(std::move(data)),
      outputs_(std::move(outputs)),
      device_(device_context_of(options_)),
      model_(options_.model, table_, options_.tensor_parallel, pipe_buffers(options_), &device_),
      optimizer_(table_, options_.optimizer, options_.data_parallel, options_.model_parallel,
                 &device_),
      lr_scheduler_(options_.lr_schedule),
      batch_schedule_(options_.global_batch_size, options_.model.micro_batch_size,
                      options_.data_parallel != nullptr ? options_.data_parallel->size() : 1,
                      options_.rampup),
      flops_(flops_model(options_)) {
  if (several(options_.pipeline)) {
    pipeline_.emplace(model_, options_.pipeline,
                      several(options_.embedding) ? options_.embedding : nullptr);
    const std::optional<std::size_t> word =
        table_.find(model::GptConfig::kEmbeddingSpec, "word_embeddings.weight");
    if (word && several(options_.embedding)) optimizer_.reduce_after_tied_gradient(*word);
  }
}

void Trainer::broadcast_tied_weights() {
  if (!pipelined() || !several(options_.embedding)) return;
  const std::size_t word =
      table_.index_of(model::GptConfig::kEmbeddingSpec, "word_embeddings.weight");
  options_.embedding->broadcast(optimizer_.params().view(word), 0);
}

void Trainer::initialize_parameters() {
  // Written straight into the optimizer's fp32 buffer on the host: no model-sized copy.
  optimizer_.initialize_with(
      [this](const model::ParamBuffer& fp32) { model::initialize_parameters(fp32, options_.seed); },
      lr_scheduler_.lr());
}

Trainer::IterationResult Trainer::train_iteration(data::BatchLoader& loader) {
  IterationResult result;
  result.global_batch = batch_schedule_.global_batch_at(progress_.consumed_train_samples);
  const std::int64_t micro_batches =
      batch_schedule_.num_microbatches_at(progress_.consumed_train_samples);
  // The engine divides each micro-batch loss by M before backward (training.md §3.6) and the
  // fp16 scaler multiplies it by the loss scale.
  const float loss_scale =
      static_cast<float>(optimizer_.loss_scale() / static_cast<double>(micro_batches));
  const double loss_sum = pipelined()
                              ? pipelined_forward_backward(loader, micro_batches, loss_scale)
                              : forward_backward_all(loader, micro_batches, loss_scale);
  result.loss =
      sum_over_ranks(loss_sum) / static_cast<double>(micro_batches * data_parallel_size());
  result.step = optimizer_.step(lr_scheduler_.lr(), progress_.iteration + 1);
  return result;
}

model::DropoutContext Trainer::training_dropout(std::int64_t micro_batch) const {
  model::DropoutContext dropout;
  dropout.seed = options_.seed;
  dropout.iteration = static_cast<std::uint64_t>(progress_.iteration);
  // The micro-batch's index in the whole global batch (the sampler deals rank r the r-th b of
  // every b·D samples), so that masks do not depend on D.
  dropout.micro_batch =
      static_cast<std::uint64_t>(micro_batch * data_parallel_size() + data_parallel_rank());
  dropout.training = true;
  return dropout;
}

model::ModelParams Trainer::model_params() const {
  if (options_.model.activation_dtype == tensor::DType::kFloat32) return optimizer_.compute();
  return optimizer_.weights();
}

double Trainer::forward_backward_all(data::BatchLoader& loader, std::int64_t micro_batches,
                                     float loss_scale) {
  double loss_sum = 0.0;
  for (std::int64_t mb = 0; mb < micro_batches; ++mb) {
    data::MicroBatchArrays arrays = loader.next();
    const bool last = mb + 1 == micro_batches;
    // With overlap_comm the gradients are reduced over DP as the backward finishes them.
    model::GradientsReady ready;
    if (optimizer_.wants_gradients_ready(last)) {
      ready = [this](std::span<const std::size_t> params) { optimizer_.gradients_ready(params); };
    }
    loss_sum += model_.forward_backward(model_params(), optimizer_.micro_grads(), view_of(arrays),
                                        training_dropout(mb), loss_scale,
                                        model::GradientWrite::kOverwrite, ready);
    // One stage: no tied-gradient reduction follows the last micro-batch.
    optimizer_.accumulate_micro_batch(last);
  }
  return loss_sum;
}

double Trainer::pipelined_forward_backward(data::BatchLoader& loader, std::int64_t micro_batches,
                                           float loss_scale) {
  data::MicroBatchArrays arrays;
  PipelineStepInput input;
  input.micro_batches = micro_batches;
  input.load = [&](std::int64_t) {
    arrays = loader.next();
    return view_of(arrays);
  };
  input.dropout = [this](std::int64_t mb) { return training_dropout(mb); };
  input.loss_scale = loss_scale;
  // With overlap_comm the gradients are reduced over DP as the backward finishes them (the last
  // micro-batch's at stages 0 and 1, the tied word embedding's after ReduceTiedGrads; every
  // micro-batch's at stage 2); otherwise ReduceTiedGrads may still round them.
  const bool overlap = optimizer_.overlaps_reduction();
  if (overlap) {
    input.backward_ready = [this, micro_batches](std::int64_t mb) -> model::GradientsReady {
      if (!optimizer_.wants_gradients_ready(mb + 1 == micro_batches)) return {};
      return [this](std::span<const std::size_t> params) { optimizer_.gradients_ready(params); };
    };
  }
  input.after_backward = [this, overlap, micro_batches](std::int64_t mb) {
    optimizer_.accumulate_micro_batch(overlap && mb + 1 == micro_batches);
  };
  // Only the first and the last stage hold the tied word embedding (and reduce it).
  if (const std::optional<std::size_t> word =
          table_.find(model::GptConfig::kEmbeddingSpec, "word_embeddings.weight")) {
    input.reduce_tied_grads = [this, word = *word](dist::Communicator& embedding) {
      optimizer_.reduce_tied_gradient(word, embedding);
    };
  }
  // Only the first and the last stage read the data; the others leave their loader alone.
  return pipeline_->train_step(model_params(), optimizer_.micro_grads(), input);
}

double Trainer::evaluation_losses(data::BatchLoader& loader, std::int64_t micro_batches) {
  model::DropoutContext no_dropout;
  no_dropout.training = false;
  if (pipelined()) {
    data::MicroBatchArrays arrays;
    PipelineStepInput input;
    input.micro_batches = micro_batches;
    input.load = [&](std::int64_t) {
      arrays = loader.next();
      return view_of(arrays);
    };
    input.dropout = [&](std::int64_t) { return no_dropout; };
    return pipeline_->eval_step(model_params(), input);
  }
  double total = 0.0;
  for (std::int64_t mb = 0; mb < micro_batches; ++mb) {
    data::MicroBatchArrays arrays = loader.next();
    total += model_.forward_loss(model_params(), view_of(arrays), no_dropout);
  }
  return total;
}

EvalResult Trainer::evaluate(const data::SampleSource& source, std::int64_t first_sample) {
  data::BatchLoader loader(source, loader_options(first_sample));
  // Upstream sets the micro-batch count at the start of each iteration (and when loading), so an
  // evaluation runs with the batch of the iteration just trained, not the next one's.
  const std::int64_t micro_batches = batch_schedule_.num_microbatches_at(
      last_iteration_start_.value_or(progress_.consumed_train_samples));
  double total = 0.0;
  for (std::int64_t it = 0; it < options_.eval_iters; ++it) {
    total += evaluation_losses(loader, micro_batches);
    progress_.consumed_valid_samples +=
        data_parallel_size() * options_.model.micro_batch_size * micro_batches;
  }
  EvalResult result;
  result.lm_loss = sum_over_ranks(total) /
                   static_cast<double>(options_.eval_iters * micro_batches * data_parallel_size());
  result.ppl = std::exp(std::min(20.0, result.lm_loss));
  return result;
}

void Trainer::validate(const std::string& prefix) {
  const auto groups = static_cast<std::int64_t>(data_.valid.size());
  const std::int64_t first_sample = groups ? progress_.consumed_valid_samples / groups : 0;
  for (const data::SampleSource& valid : data_.valid) {
    evaluate_and_print(valid, prefix, first_sample, false);
  }
}

void Trainer::evaluate_and_print(const data::SampleSource& source, const std::string& prefix,
                                 std::int64_t first_sample, bool is_test) {
  const EvalResult result = evaluate(source, first_sample);
  // Upstream always passes a group name ("valid" / "test" in the --data-path mode).
  std::string line = source.name + " loss at " + prefix + " | ";
  line += "lm loss value: " + python_format_e(result.lm_loss, 6) + " | ";
  line += "lm loss PPL: " + python_format_e(result.ppl, 6) + " | ";
  const std::string rule(line.size() + 1, '-');
  outputs_.log->info(rule);
  outputs_.log->info(line);
  outputs_.log->info(rule);
  EvalRecord record;
  record.split = is_test ? "test" : "valid";
  record.group = source.name;
  record.iteration = is_test ? 0 : progress_.iteration;
  record.lm_loss = result.lm_loss;
  record.ppl = result.ppl;
  record.consumed_train_samples = progress_.consumed_train_samples;
  record.consumed_train_tokens = progress_.consumed_train_tokens;
  record.gigaflos_no_embeds = progress_.gigaflos_no_embeds;
  outputs_.record_eval(record);
}

void Trainer::log_iteration(const IterationResult& result, double elapsed_seconds) {
  // Skipped fp16 steps count too: upstream's DeepSpeed path reports every iteration as not skipped
  // (training.md §5.7 step 4), so its average takes every iteration's loss.
  loss_sum_ += result.loss;
  ++iterations_since_log_;
  seconds_since_log_ += elapsed_seconds;

  const double flops = flops_per_iteration(flops_, result.global_batch);
  TrainRecord record;
  record.iteration = progress_.iteration;
  record.consumed_samples = progress_.consumed_train_samples;
  record.consumed_tokens = progress_.consumed_train_tokens;
  record.lm_loss = result.loss;
  record.lr = lr_scheduler_.lr();
  record.global_batch_size = result.global_batch;
  record.grad_norm = result.step.grad_norm;
  record.num_zeros = 0.0;
  if (optimizer_.options().precision == Precision::kFp16)
    record.loss_scale = optimizer_.loss_scale();
  record.skipped = result.step.skipped;
  record.elapsed_seconds = elapsed_seconds;
  record.samples_per_second = static_cast<double>(result.global_batch) / elapsed_seconds;
  record.tflops = tflops(flops, elapsed_seconds, world_size());
  record.gigaflos_no_embeds = progress_.gigaflos_no_embeds;
  outputs_.record_train(record);

  seconds_since_steps_print_ += elapsed_seconds;
  if (progress_.global_steps % options_.steps_per_print == 0) {
    // DeepSpeed's engine reports its progress inside the step, then PipelineEngine prints its
    // line, both on rank 0.
    const AdamHyperParams& adam = optimizer_.options().adam;
    outputs_.log->info(format_deepspeed_progress_line(progress_.global_steps,
                                                      progress_.skipped_steps, lr_scheduler_.lr(),
                                                      adam.beta1, adam.beta2, optimizer_groups()));
    const double iter_time =
        seconds_since_steps_print_ / static_cast<double>(options_.steps_per_print);
    outputs_.log->info(
        format_deepspeed_steps_line(progress_.global_steps, result.loss, iter_time,
                                    static_cast<double>(result.global_batch) / iter_time));
    seconds_since_steps_print_ = 0.0;
  }

  if (progress_.iteration % options_.log_interval != 0) return;
  const double per_iteration = seconds_since_log_ / static_cast<double>(iterations_since_log_);
  TrainingLogFields fields;
  fields.iteration = progress_.iteration;
  fields.train_iters = options_.train_iters;
  fields.consumed_samples = progress_.consumed_train_samples;
  fields.consumed_tokens = progress_.consumed_train_tokens;
  fields.elapsed_per_iteration = per_iteration;
  fields.learning_rate = lr_scheduler_.lr();
  fields.global_batch_size = result.global_batch;
  fields.losses.emplace_back("lm loss", loss_sum_ / static_cast<double>(iterations_since_log_));
  if (record.loss_scale) fields.loss_scale = record.loss_scale;
  fields.grad_norm = result.step.grad_norm;
  if (options_.log_params_norm) {
    fields.params_norm = params_norm();
  }
  // DeepSpeed mode reports skipped and num-zeros as 0 (training.md §5.7 step 4).
  fields.num_zeros = 0.0;
  fields.skipped_iterations = 0;
  fields.nan_iterations = 0;
  fields.samples_per_second = static_cast<double>(result.global_batch) / per_iteration;
  fields.tflops = tflops(flops, per_iteration, world_size());
  outputs_.log->info(format_training_log_line(fields));
  ThroughputRecord throughput;
  throughput.iteration = progress_.iteration;
  throughput.consumed_samples = progress_.consumed_train_samples;
  throughput.consumed_tokens = progress_.consumed_train_tokens;
  throughput.elapsed_per_iteration = per_iteration;
  throughput.samples_per_second = fields.samples_per_second;
  throughput.seq_length = options_.model.config.seq_length;
  throughput.tflops = fields.tflops;
  outputs_.record_throughput(throughput);
  loss_sum_ = 0.0;
  iterations_since_log_ = 0;
  seconds_since_log_ = 0.0;
}

int Trainer::optimizer_groups() const {
  // DeepSpeed drops the empty ones of Megatron's three weight-decay groups (training.md §4.2).
  bool used[model::kNumDecayGroups] = {};
  for (const model::ParamSpec& param : table_.params()) used[static_cast<int>(param.group)] = true;
  int groups = 0;
  for (const bool group_used : used) groups += group_used ? 1 : 0;
  return groups;
}

double Trainer::params_norm() const {
  // calc_params_l2_norm: the model's (16-bit) weights, widened, TP duplicates once, summed over
  // the model-parallel group. The per-parameter sums come from one ops::sums_of_squares (one wait
  // on a device) over the weights themselves: 16-bit ones widened as they are read, the bits of
  // their fp32 compute copy's sums, which need not exist.
  std::vector<ops::SquaresSegment> segments;
  for (const model::ParamSpec& param : table_.params()) {
    // The last stage's tied replica would count the word embedding twice (upstream does).
    if (param.tied_replica || !table_.counts_in_norm(param)) continue;
    segments.push_back({param.offset, param.local_numel()});
  }
  double sum = 0.0;
  for (const double part : ops::sums_of_squares(device_, optimizer_.weights().flat(), segments)) {
    sum += part;
  }
  if (options_.model_parallel != nullptr && options_.model_parallel->size() > 1) {
    options_.model_parallel->all_reduce(
        tensor::Tensor(&sum, tensor::DType::kFloat64, tensor::Shape{1}), dist::ReduceOp::kSum);
  }
  return std::sqrt(sum);
}

dist::Communicator* Trainer::job() const {
  return options_.world != nullptr ? options_.world : options_.data_parallel;
}

std::int64_t Trainer::world_size() const {
  return job() != nullptr ? job()->size() : 1;
}

std::int64_t Trainer::data_parallel_size() const {
  return options_.data_parallel != nullptr ? options_.data_parallel->size() : 1;
}

std::int64_t Trainer::data_parallel_rank() const {
  return options_.data_parallel != nullptr ? options_.data_parallel->rank() : 0;
}

double Trainer::sum_over_ranks(double value) const {
  if (data_parallel_size() == 1) return value;
  double sum = value;
  options_.data_parallel->all_reduce(
      tensor::Tensor(&sum, tensor::DType::kFloat64, tensor::Shape{1}), dist::ReduceOp::kSum);
  return sum;
}

void Trainer::log_new_kernel_shape_picks() {
  const std::vector<std::string> picks = device_.kernel_shape_picks();
  for (; kernel_shape_picks_logged_ < picks.size(); ++kernel_shape_picks_logged_) {
    outputs_.log->info(" > kernel shape picked by timing, " + picks[kernel_shape_picks_logged_]);
  }
}

bool Trainer::any_rank(bool condition) const {
  dist::Communicator* everyone = job();
  if (!several(everyone)) return condition;
  std::int64_t flag = condition ? 1 : 0;
  everyone->all_reduce(tensor::Tensor(&flag, tensor::DType::kInt64, tensor::Shape{1}),
                       dist::ReduceOp::kMax);
  return flag != 0;
}

data::BatchLoaderOptions Trainer::loader_options(std::int64_t consumed_samples) const {
  data::BatchLoaderOptions loader;
  loader.micro_batch_size = options_.model.micro_batch_size;
  loader.data_parallel_size = data_parallel_size();
  loader.data_parallel_rank = data_parallel_rank();
  loader.consumed_samples = consumed_samples;
  loader.seq_length = options_.model.config.seq_length;
  loader.batch = options_.batches;
  return loader;
}

bool Trainer::kill_switch_found() const {
  return options_.kill_switch_path && std::filesystem::exists(*options_.kill_switch_path);
}

bool Trainer::save_if(CheckpointSaver* saver, bool condition) {
  if (saver == nullptr || !condition || last_saved_iteration_ == progress_.iteration) return false;
  optimizer_.copy_state_to_host();
  saver->save(*this);
  last_saved_iteration_ = progress_.iteration;
  return true;
}

std::optional<std::vector<IterationRange>> Trainer::remaining_skip_ranges() const {
  if (!options_.skip_train_iteration_ranges) return std::nullopt;
  const SkipRanges ranges =
      skip_ranges_ ? *skip_ranges_
                   : SkipRanges(*options_.skip_train_iteration_ranges, progress_.iteration);
  return std::vector<IterationRange>(ranges.remaining().begin(), ranges.remaining().end());
}

void Trainer::skip_iterations(const IterationRange& range) {
  outputs_.log->info("Skipped iterations " + std::to_string(range.start) + " to " +
                     std::to_string(range.end) + " due to --skip-train-iteration-range flag.");
  for (std::int64_t iteration = progress_.iteration + 1; iteration <= range.end; ++iteration) {
    progress_.consumed_train_samples +=
        batch_schedule_.global_batch_at(progress_.consumed_train_samples);
  }
}

void Trainer::evaluate_at_the_end(CheckpointSaver* saver, bool save) {
  // Upstream's do_valid / do_test: --eval-iters 0 means no validation and no test.
  if (options_.eval_iters > 0) validate("the end of training for val data");
  save_if(saver, save);
  if (options_.eval_iters <= 0) return;
  for (const data::SampleSource& test : data_.test) {
    evaluate_and_print(test, "the end of training for test data", 0, true);
  }
}

std::chrono::system_clock::time_point Trainer::exit_clock_start() const {
  using std::chrono::milliseconds;
  const std::chrono::system_clock::time_point mine =
      options_.process_start.value_or(std::chrono::system_clock::now());
  dist::Communicator* everyone = job();
  if (!options_.exit_duration_in_mins || !several(everyone)) return mine;
  // The minimum as a maximum of negated milliseconds (upstream reduces an fp32 tensor of epoch
  // seconds, which rounds the start to 128 s).
  std::int64_t negated = -std::chrono::duration_cast<milliseconds>(mine.time_since_epoch()).count();
  everyone->all_reduce(tensor::Tensor(&negated, tensor::DType::kInt64, tensor::Shape{1}),
                       dist::ReduceOp::kMax);
  return std::chrono::system_clock::time_point(milliseconds(-negated));
}

StopReason Trainer::train(CheckpointSaver* saver) {
  if (!options_.train) {
    evaluate_at_the_end(saver, false);
    return StopReason::kFinished;
  }
  const std::chrono::system_clock::time_point start = exit_clock_start();
  const double params_billions = non_embedding_parameters_in_billions(options_.model.config);
  if (!data_.train) base::fail("pretrain: there is no training data (the split gives it none)");
  skip_ranges_.emplace(options_.skip_train_iteration_ranges.value_or(std::vector<IterationRange>{}),
                       progress_.iteration);
  auto loader = std::make_unique<data::BatchLoader>(
      *data_.train, loader_options(progress_.consumed_train_samples));
  while (progress_.iteration < options_.train_iters) {
    if (const std::optional<IterationRange> range = skip_ranges_->take(progress_.iteration)) {
      skip_iterations(*range);
      loader.reset();  // its worker thread reads ahead; the next one starts past the skipped data
      loader = std::make_unique<data::BatchLoader>(
          *data_.train, loader_options(progress_.consumed_train_samples));
      continue;
    }
    if (any_rank(kill_switch_found())) {
      save_if(saver, true);
      outputs_.log->info("Detected kill switch at " + *options_.kill_switch_path + ". Exiting");
      return StopReason::kKillSwitch;
    }
    const Clock::time_point iteration_start = Clock::now();
    last_iteration_start_ = progress_.consumed_train_samples;
    const IterationResult result = train_iteration(*loader);
    ++progress_.global_steps;
    if (result.step.skipped) {
      ++progress_.skipped_steps;
    } else {
      // Skipped fp16 steps do not advance the schedule (training.md §5.5).
      lr_scheduler_.step(result.global_batch, progress_.consumed_train_tokens);
    }
    ++progress_.iteration;
    progress_.consumed_train_samples += result.global_batch;
    progress_.consumed_train_tokens += result.global_batch * options_.model.config.seq_length;
    progress_.gigaflos_no_embeds += 6.0 * static_cast<double>(result.global_batch) *
                                    static_cast<double>(options_.model.config.seq_length) *
                                    params_billions;
    log_iteration(result, seconds_since(iteration_start));
    log_new_kernel_shape_picks();

    if (options_.eval_interval > 0 && progress_.iteration % options_.eval_interval == 0 &&
        has_valid_data()) {
      validate("iteration " + std::to_string(progress_.iteration));
    }
    if (options_.save_interval) {
      save_if(saver, progress_.iteration % *options_.save_interval == 0);
    }
    const double minutes =
        std::chrono::duration<double>(std::chrono::system_clock::now() - start).count() / 60.0;
    if (options_.exit_duration_in_mins && any_rank(minutes > *options_.exit_duration_in_mins)) {
      save_if(saver, true);
      outputs_.log->info("exiting program after " + std::to_string(minutes) + " minutes");
      return StopReason::kExitDuration;
    }
    if (options_.exit_interval && progress_.iteration % *options_.exit_interval == 0) {
      save_if(saver, true);
      outputs_.log->info("exiting program at iteration " + std::to_string(progress_.iteration));
      return StopReason::kExitInterval;
    }
    if (any_rank(base::stop_signal_received() != 0)) {
      save_if(saver, true);
      return StopReason::kSignal;
    }
  }
  evaluate_at_the_end(saver, progress_.iteration != 0);
  return StopReason::kFinished;
}

}  // namespace mds::train
