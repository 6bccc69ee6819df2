// Throughput numbers and the text of the training log lines, character for character as
// megatron/training.py (training_log) and DeepSpeed's PipelineEngine print them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mds::train {

// Python's format(value, '.{precision}E'): correctly rounded, exponent of at least two digits,
// "NAN" / "INF" / "-INF" for non-finite values (never a signed NaN).
std::string python_format_e(double value, int precision);
// Python's format(value, '.{precision}f'), "nan" / "inf" / "-inf" for non-finite values.
std::string python_format_f(double value, int precision);
// Python's format(value, '{width}d'): right-aligned in `width` columns.
std::string python_format_d(int64_t value, int width);

// What the BigScience TFLOPs estimate (Narayanan et al. eq. 3) needs.
struct FlopsModel {
  int64_t seq_length = 0;  // the curriculum seqlen when curriculum learning is on
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t padded_vocab_size = 0;
  bool checkpoint_activations = false;  // factor 4 instead of 3 (forward recomputed)
  bool glu_activation = false;          // coefficient 32 instead of 24
};

// coef·ckpt·G·s·L·h² · (1 + s/(6h) + Vp/(16·L·h)), the integer part computed exactly first as
// Python does with its unbounded ints.
double flops_per_iteration(const FlopsModel& model, int64_t global_batch_size);
// flops / (elapsed_per_iteration · world_size · 1e12).
double tflops(double flops_per_iter, double elapsed_per_iteration, int64_t world_size);

// One training log line's fields; optional ones are left out when absent.
struct TrainingLogFields {
  int64_t iteration = 0;
  int64_t train_iters = 0;
  int64_t consumed_samples = 0;
  int64_t consumed_tokens = 0;
  double elapsed_per_iteration = 0.0;  // seconds
  double learning_rate = 0.0;          // after this iteration's scheduler step
  int64_t global_batch_size = 0;
  // (name, average since the last log); printed only if the average is > 0, e.g. {"lm loss", x}.
  std::vector<std::pair<std::string, double>> losses;
  std::optional<double> loss_scale;  // fp16 only
  std::optional<double> grad_norm;
  std::optional<double> num_zeros;
  std::optional<double> params_norm;  // --log-params-norm
  std::optional<int64_t> curriculum_seqlen;
  int64_t skipped_iterations = 0;
  int64_t nan_iterations = 0;
  double samples_per_second = 0.0;
  double tflops = 0.0;
};

// " iteration      100/  311541 | consumed samples: … | TFLOPs: 0.18 |" (no newline).
std::string format_training_log_line(const TrainingLogFields& fields);

// DeepSpeed's every-steps_per_print line:
// "steps: 10 loss: 2.3456 iter time (s): 0.123 samples/sec: 130.081".
std::string format_deepspeed_steps_line(int64_t global_steps, double loss, double iter_time,
                                        double samples_per_second);

// The message of DeepSpeed's engine _report_progress (log_dist on rank 0), printed at the same
// steps just before the line above: one lr and one (beta1, beta2) per optimizer parameter group,
// Python reprs:
// "[Rank 0] step=10, skipped=0, lr=[0.0001, 0.0001, 0.0001], mom=[(0.9, 0.95), (0.9, 0.95), …]".
std::string format_deepspeed_progress_line(int64_t step, int64_t skipped, double lr, double beta1,
                                           double beta2, int groups);

}  // namespace mds::train
