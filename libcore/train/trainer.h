// The training loop of megatron/training.py (DeepSpeed branch, training.md §5.7–§5.9) on one
// process: batch ramp-up, gradient accumulation over micro-batches, the optimizer step with loss
// scaling and clipping, the LR schedule, periodic logs, evaluation, checkpoints and the exit
// conditions. Checkpoint files are not written here: a CheckpointSaver (ckpt/) is called at the
// save points. The model and the optimizer run on TrainerOptions::device, through a
// DeviceContext the trainer owns.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "data/batch_loader.h"
#include "data/train_datasets.h"
#include "dist/communicator.h"
#include "model/gpt_model.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "ops/device_context.h"
#include "train/batch_rampup.h"
#include "train/lr_schedule.h"
#include "train/metrics_log.h"
#include "train/mixed_precision_optimizer.h"
#include "train/pipeline_executor.h"
#include "train/skip_ranges.h"
#include "train/throughput.h"

namespace mds::train {

// The dtype of the model's activations (model::ModelOptions::activation_dtype). kAuto does what
// upstream does on a GPU: a --bf16/--fp16 run on a CUDA device computes with 16-bit activations
// from the 16-bit weights alone (the optimizer keeps no fp32 compute copy); on the host it keeps
// fp32 compute from the compute copy, the widened 16-bit weights (architecture.md §4). kFp32 is
// fp32 everywhere; kParams uses the params' dtype (16-bit for --bf16/--fp16, fp32 otherwise)
// wherever the model runs, the host included (16-bit: no compute copy there either).
enum class ActivationPrecision { kAuto, kFp32, kParams };

// The activation dtype `choice` gives a run of `precision` on `device`.
tensor::DType activation_dtype(ActivationPrecision choice, Precision precision,
                               tensor::Device device);

struct TrainerOptions {
  model::ModelOptions model;  // its activation_dtype is decided by `activations`
  ActivationPrecision activations = ActivationPrecision::kAuto;
  OptimizerOptions optimizer;
  LrScheduleConfig lr_schedule;
  std::int64_t global_batch_size = 0;  // G (final, after any ramp-up)
  std::optional<RampupBatchSize> rampup;
  std::int64_t train_iters = 0;
  std::int64_t log_interval = 100;
  std::int64_t eval_interval = 1000;
  std::int64_t eval_iters = 100;
  std::optional<std::int64_t> save_interval;  // set when --save is given
  std::optional<std::int64_t> exit_interval;
  std::optional<double> exit_duration_in_mins;
  // This rank's start (the program's first step): the exit-duration clock runs from the earliest
  // over all ranks, so the set-up (datasets, index maps, checkpoint loading) counts as upstream's
  // does. Unset: from the call to train().
  std::optional<std::chrono::system_clock::time_point> process_start;
  std::uint64_t seed = 1234;
  std::int64_t steps_per_print = 10;            // DeepSpeed's own progress line
  std::optional<std::string> kill_switch_path;  // save and exit once this file exists
  bool train = true;  // false: --eval-only, the end-of-training evaluations alone
  // --skip-train-iteration-range, parsed (train/skip_ranges.h); nullopt when not given.
  std::optional<std::vector<IterationRange>> skip_train_iteration_ranges;
  bool log_params_norm = false;  // "params norm" in the log line
  data::BatchOptions batches;    // EOD masking and position resets
  // The data-parallel group (not owned; null or one rank: a single process). Each rank trains
  // on its b of every b·D samples, gradients and losses are averaged over the group, and every
  // decision to stop is taken by all ranks together.
  dist::Communicator* data_parallel = nullptr;
  // This rank's TP group (the model's collectives) and DeepSpeed's model-parallel group (P×T
  // ranks of one replica: gradient norm and overflow reductions). Not owned; null for T = P = 1.
  dist::Communicator* tensor_parallel = nullptr;
  dist::Communicator* model_parallel = nullptr;
  // With P > 1: this rank's pipeline group (its rank is the stage, model.config the stage's
  // specs) and, on the first and last stage, the tied-embedding group. Not owned.
  dist::Communicator* pipeline = nullptr;
  dist::Communicator* embedding = nullptr;
  // Every rank of the job: decisions to stop are taken by all of them together. Not owned;
  // null for one process.
  dist::Communicator* world = nullptr;
  // Where the model and the optimizer run (train/device_choice.h): the host, or this rank's CUDA
  // device (any optimizer, any grid; the groups above must then take device tensors,
  // dist::device_grid_communicators).
  tensor::Device device;
  ops::Fp32Matmul fp32_matmul = ops::Fp32Matmul::kFp32;  // --tf32: the device's fp32 GEMMs
  // --gemm-tuning-file (this rank's): the device's GEMM algorithm choices
  // (ops::DeviceContext::tune_gemms); empty: cuBLASLt's heuristic decides.
  std::string gemm_tuning_file;
  // The device's kernels with launch shapes under trial pick theirs by timing on first use, the
  // same bits either way (ops::DeviceContext::time_kernel_shapes); false: --fixed-kernel-shapes.
  bool time_kernel_shapes = true;
};

// Everything that advances with training and is saved in checkpoints besides the tensors.
struct TrainingProgress {
  std::int64_t iteration = 0;
  std::int64_t global_steps = 0;   // DeepSpeed's count: every optimizer step, skipped ones too
  std::int64_t skipped_steps = 0;  // fp16 overflow steps
  std::int64_t consumed_train_samples = 0;
  std::int64_t consumed_valid_samples = 0;
  std::int64_t consumed_train_tokens = 0;
  double gigaflos_no_embeds = 0.0;  // upstream's running x-axis for TensorBoard
};

class Trainer;
class CheckpointSaver {
 public:
  virtual ~CheckpointSaver() = default;
  // The trainer has brought its state to the optimizer's host views first
  // (MixedPrecisionOptimizer::copy_state_to_host).
  virtual void save(const Trainer& trainer) = 0;
};

enum class StopReason { kFinished, kExitInterval, kExitDuration, kSignal, kKillSwitch };

struct EvalResult {
  double lm_loss = 0.0;
  double ppl = 0.0;
};

class Trainer {
 public:
  // Fails with one line when options.device cannot be had (no CUDA backend, no such device) or
  // cannot run this configuration.
  Trainer(TrainerOptions options, const model::ParamTable& table, data::TrainValidTestDatasets data,
          TrainingOutputs outputs);
  // The model and the optimizer keep pointers to the trainer's DeviceContext.
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Fresh start: model::initialize_parameters with the seed, then the optimizer's set-up step.
  void initialize_parameters();

  // Runs until train_iters or an exit condition; evaluates and saves as upstream does. Without
  // `options.train` only the validation and test evaluations of the end run, and nothing is saved
  // (upstream's pretrain() with do_train false).
  StopReason train(CheckpointSaver* saver);
  // `eval_iters` global batches of `source` without dropout, read from sample `first_sample` on.
  // Like upstream's evaluate(), every call (test ones too) adds the samples read to
  // consumed_valid_samples.
  EvalResult evaluate(const data::SampleSource& source, std::int64_t first_sample);
  // One validation round: every validation group (one per --valid-weighted-split-paths group)
  // reads from consumed_valid_samples // (number of groups) at the round's start, which is where
  // upstream's persistent per-group iterators stand (it builds each loader at that offset, and
  // the counter sums the samples of every group). Prints one line per group.
  void validate(const std::string& prefix);
  // Evaluates and prints upstream's framed "<group> loss at <prefix> | …" line.
  void evaluate_and_print(const data::SampleSource& source, const std::string& prefix,
                          std::int64_t first_sample, bool is_test);

  const TrainerOptions& options() const { return options_; }
  const ops::DeviceContext& device_context() const { return device_; }
  const model::ParamTable& table() const { return table_; }
  TrainingProgress& progress() { return progress_; }
  const TrainingProgress& progress() const { return progress_; }
  const TrainingOutputs& outputs() const { return outputs_; }
  MixedPrecisionOptimizer& optimizer() { return optimizer_; }
  const MixedPrecisionOptimizer& optimizer() const { return optimizer_; }
  AnnealingLR& lr_scheduler() { return lr_scheduler_; }
  const AnnealingLR& lr_scheduler() const { return lr_scheduler_; }
  // Upstream's do_valid: validation data, and --eval-iters above 0.
  bool has_valid_data() const { return !data_.valid.empty() && options_.eval_iters > 0; }
  // The --skip-train-iteration-range ranges not yet reached (what upstream's args hold when it
  // saves); nullopt without the flag.
  std::optional<std::vector<IterationRange>> remaining_skip_ranges() const;

  // With P > 1: the last stage's replica of the tied word embedding (weights) := the first
  // stage's, as DeepSpeed re-broadcasts tied weights after loading a checkpoint. A collective
  // over the embedding group; nothing on other stages or with one stage.
  void broadcast_tied_weights();

 private:
  struct IterationResult {
    double loss = 0.0;
    StepResult step;
    std::int64_t global_batch = 0;
  };
  IterationResult train_iteration(data::BatchLoader& loader);
  // Σ of the micro-batch losses of one global batch on this DP rank (every stage gets the last
  // stage's sum), gradients accumulated in the optimizer.
  double forward_backward_all(data::BatchLoader& loader, std::int64_t micro_batches,
                              float loss_scale);
  double pipelined_forward_backward(data::BatchLoader& loader, std::int64_t micro_batches,
                                    float loss_scale);
  model::DropoutContext training_dropout(std::int64_t micro_batch) const;
  // What the model reads: the fp32 weights or compute copy, or with 16-bit activations the 16-bit
  // weights alone.
  model::ModelParams model_params() const;
  // Σ of the micro-batch losses of one evaluation batch (no dropout), as above.
  double evaluation_losses(data::BatchLoader& loader, std::int64_t micro_batches);
  bool pipelined() const { return pipeline_.has_value(); }
  void log_iteration(const IterationResult& result, double elapsed_seconds);
  // The device's launch-shape picks made since the last call, a line each.
  void log_new_kernel_shape_picks();
  bool save_if(CheckpointSaver* saver, bool condition);
  // Passes over the data of iterations iteration + 1 … range.end without training: the data
  // position (consumed_train_samples) moves on by their global batches, the iteration count, the
  // tokens and the LR schedule do not (upstream's counters).
  void skip_iterations(const IterationRange& range);
  // After the loop: validation, the save (when `save`), test evaluation.
  void evaluate_at_the_end(CheckpointSaver* saver, bool save);
  bool kill_switch_found() const;
  double params_norm() const;
  // The optimizer parameter groups DeepSpeed keeps (the non-empty weight-decay groups).
  int optimizer_groups() const;
  std::int64_t data_parallel_size() const;
  // Every rank of the job (the world, or the data-parallel group when none is given; null for
  // one process) and their count T·P·D, the TFLOPs' divisor (training.md §5.10).
  dist::Communicator* job() const;
  std::int64_t world_size() const;
  std::int64_t data_parallel_rank() const;
  // Σ over the data-parallel ranks (the value itself on one rank).
  double sum_over_ranks(double value) const;
  // Whether any rank saw `condition`, so that all ranks stop at the same iteration.
  bool any_rank(bool condition) const;
  // Where --exit-duration-in-mins counts from: the earliest process_start over all ranks.
  std::chrono::system_clock::time_point exit_clock_start() const;
  data::BatchLoaderOptions loader_options(std::int64_t consumed_samples) const;

  TrainerOptions options_;
  const model::ParamTable& table_;
  data::TrainValidTestDatasets data_;
  TrainingOutputs outputs_;
  ops::DeviceContext device_;  // before the model and the optimizer, which use it
  model::GptModel model_;
  std::optional<PipelineExecutor> pipeline_;  // P > 1
  MixedPrecisionOptimizer optimizer_;
  AnnealingLR lr_scheduler_;
  GlobalBatchSchedule batch_schedule_;
  FlopsModel flops_;
  TrainingProgress progress_;
  std::optional<SkipRanges> skip_ranges_;  // from train() on
  // consumed_train_samples when the last trained iteration started: the batch size evaluations
  // use (upstream's num microbatches stays the last iteration's); unset before any iteration.
  std::optional<std::int64_t> last_iteration_start_;

  // Averages since the last log line (training.md §5.9).
  double loss_sum_ = 0.0;
  std::int64_t iterations_since_log_ = 0;
  double seconds_since_log_ = 0.0;
  double seconds_since_steps_print_ = 0.0;
  std::size_t kernel_shape_picks_logged_ = 0;
  std::int64_t last_saved_iteration_ = -1;
};

}  // namespace mds::train
