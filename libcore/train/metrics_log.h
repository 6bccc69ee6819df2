// Where training numbers go besides the log line (training.md §5.9): a JSON-lines metrics file,
// and TensorBoard scalars with exactly the tags and x-axes megatron/training.py writes
// (training_log, evaluate_and_print_results) and megatron/initialize.py at start-up.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "base/log.h"
#include "io/tensorboard_writer.h"

namespace mds::train {

// One training iteration.
struct TrainRecord {
  std::int64_t iteration = 0;         // after this step (1 for the first)
  std::int64_t consumed_samples = 0;  // consumed_train_samples after this step
  std::int64_t consumed_tokens = 0;
  double lm_loss = 0.0;  // this iteration's loss (not an average)
  double lr = 0.0;       // group-0 LR after the scheduler step, as upstream logs it
  std::int64_t global_batch_size = 0;
  std::optional<double> grad_norm;
  std::optional<double> loss_scale;   // fp16 only
  std::optional<double> num_zeros;    // upstream's DeepSpeed branch reports 0
  std::optional<double> params_norm;  // --log-params-norm
  std::optional<std::int64_t> curriculum_seqlen;
  bool skipped = false;
  double elapsed_seconds = 0.0;  // this iteration
  double samples_per_second = 0.0;
  double tflops = 0.0;
  double gigaflos_no_embeds = 0.0;  // running total, an x-axis of the loss plots
};

// The throughput numbers of one log line (every --log-interval iterations), averaged over the
// interval; TensorBoard gets them only with --log-timers-to-tensorboard.
struct ThroughputRecord {
  std::int64_t iteration = 0;
  std::int64_t consumed_samples = 0;
  std::int64_t consumed_tokens = 0;
  double elapsed_per_iteration = 0.0;
  double samples_per_second = 0.0;
  std::int64_t data_parallel_size = 1;
  std::int64_t seq_length = 0;  // the curriculum seqlen when curriculum learning is on
  double tflops = 0.0;
};

// One evaluation.
struct EvalRecord {
  std::string split = "valid";  // "valid" or "test"
  std::string group;            // the dataset group (mode 2 name); empty: the split's name
  std::int64_t iteration = 0;
  double lm_loss = 0.0;
  double ppl = 0.0;  // exp(min(20, lm_loss))
  std::int64_t consumed_train_samples = 0;
  std::int64_t consumed_train_tokens = 0;
  double gigaflos_no_embeds = 0.0;
};

// The JSON objects, one line each (no newline): numbers that are not finite become null.
// {"type":"train","iteration":…,"consumed_samples":…,"consumed_tokens":…,"lm_loss":%.9g,"lr":…,
//  "global_batch_size":…,"grad_norm":…|null,"loss_scale":…|null,"skipped":true|false,
//  "elapsed_s":…,"samples_per_second":…,"tflops":…}
std::string format_train_json(const TrainRecord& record);
// {"type":"valid"|"test","iteration":…,"lm_loss":%.9g,"ppl":…} plus "name" for a named group.
std::string format_eval_json(const EvalRecord& record);

// --metrics-file: appended to (a resumed run continues the same file), flushed after each line.
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write_train(const TrainRecord& record);
  void write_eval(const EvalRecord& record);

 private:
  void write_line(const std::string& line);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// The --tensorboard-* flags (megatron/arguments.py).
struct TensorboardOptions {
  std::int64_t log_interval = 1;    // --tensorboard-log-interval
  bool log_learning_rate = true;    // off with --no-log-learnig-rate-to-tensorboard (sic)
  bool log_loss_scale = true;       // off with --no-log-loss-scale-to-tensorboard
  bool log_batch_size = false;      // --log-batch-size-to-tensorboard
  bool log_validation_ppl = false;  // --log-validation-ppl-to-tensorboard
  // --log-timers-to-tensorboard: the iteration-time scalars. Upstream's per-timer scalars
  // (forward-compute, ...) are not written: this trainer has no such timers.
  bool log_timers = false;
};

// training_log's scalars for one iteration, written when iteration % log_interval == 0:
// steps-vs-samples/…, steps-vs-tokens/…, learning-rate/…, batch-size/…, lm-loss-training/lm loss
// (vs samples, tokens, gigaflos), loss-scale/… (fp16), grad-norm/…, num-zeros/…, params-norm/…,
// curriculum_seqlen. A gigaflos x-axis is truncated to an integer step, as torch does.
void write_train_scalars(io::SummarySink& writer, const TrainRecord& record,
                         const TensorboardOptions& options);
// The iteration-time/… scalars of a log line (only with log_timers).
void write_throughput_scalars(io::SummarySink& writer, const ThroughputRecord& record,
                              const TensorboardOptions& options);
// evaluate_and_print_results: lm-loss-validation/<group>/lm loss validation (vs samples, tokens,
// gigaflos) and, with log_validation_ppl, the same for "… validation ppl". Upstream evaluates the
// test split with iteration 0, so test scalars are written at step 0.
void write_eval_scalars(io::SummarySink& writer, const EvalRecord& record,
                        const TensorboardOptions& options);
// write_args_to_tensorboard (one text summary per argument, at `iteration`) and
// log_restart_to_tensorboard (iteration-time/world_size: world_size at `iteration`, 0 at the
// next, a blip that marks the restart).
void write_run_start(io::SummarySink& writer,
                     std::span<const std::pair<std::string, std::string>> args,
                     std::int64_t world_size, std::int64_t iteration);

// Everything a trainer reports to: the log (stdout/stderr lines), and optionally the metrics file
// and TensorBoard (only the last rank has these, as upstream).
struct TrainingOutputs {
  const base::Log* log = nullptr;
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<io::SummarySink> tensorboard;  // an io::TensorboardWriter
  TensorboardOptions tensorboard_options;

  void record_train(const TrainRecord& record) const;
  void record_throughput(const ThroughputRecord& record) const;
  void record_eval(const EvalRecord& record) const;
};

}  // namespace mds::train
