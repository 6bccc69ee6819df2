#include "train/metrics_log.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/error.h"
#include "config/json_document.h"

namespace mds::train {
namespace {

// Shortest text that reads back as the same double; null when not finite (JSON has no NaN).
std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[64];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

std::string json_number(const std::optional<double>& value) {
  return value ? json_number(*value) : "null";
}

std::string json_g9(double value) {
  if (!std::isfinite(value)) return "null";
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

// torch's add_scalar stores int(global_step).
std::optional<std::int64_t> step_of(double x_axis) {
  if (!std::isfinite(x_axis) || std::fabs(x_axis) >= 9.2e18) return std::nullopt;
  return static_cast<std::int64_t>(x_axis);
}

// "<base>", "<base> vs samples", "<base> vs tokens" at iteration, samples and tokens.
void write_three(io::SummarySink& writer, const std::string& base, double value,
                 const TrainRecord& record) {
  writer.add_scalar(base, value, record.iteration);
  writer.add_scalar(base + " vs samples", value, record.consumed_samples);
  writer.add_scalar(base + " vs tokens", value, record.consumed_tokens);
}

}  // namespace

std::string format_train_json(const TrainRecord& r) {
  std::string line = "{\"type\":\"train\"";
  line += ",\"iteration\":" + std::to_string(r.iteration);
  line += ",\"consumed_samples\":" + std::to_string(r.consumed_samples);
  line += ",\"consumed_tokens\":" + std::to_string(r.consumed_tokens);
  line += ",\"lm_loss\":" + json_g9(r.lm_loss);
  line += ",\"lr\":" + json_number(r.lr);
  line += ",\"global_batch_size\":" + std::to_string(r.global_batch_size);
  line += ",\"grad_norm\":" + json_number(r.grad_norm);
  line += ",\"loss_scale\":" + json_number(r.loss_scale);
  line += std::string(",\"skipped\":") + (r.skipped ? "true" : "false");
  line += ",\"elapsed_s\":" + json_number(r.elapsed_seconds);
  line += ",\"samples_per_second\":" + json_number(r.samples_per_second);
  line += ",\"tflops\":" + json_number(r.tflops);
  return line + "}";
}

std::string format_eval_json(const EvalRecord& r) {
  std::string line = "{\"type\":" + config::json_quote(r.split);
  if (!r.group.empty() && r.group != r.split) line += ",\"name\":" + config::json_quote(r.group);
  line += ",\"iteration\":" + std::to_string(r.iteration);
  line += ",\"lm_loss\":" + json_g9(r.lm_loss);
  line += ",\"ppl\":" + json_number(r.ppl);
  return line + "}";
}

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr) base::fail_errno("--metrics-file " + path);
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::write_train(const TrainRecord& record) {
  write_line(format_train_json(record));
}

void MetricsLog::write_eval(const EvalRecord& record) {
  write_line(format_eval_json(record));
}

void MetricsLog::write_line(const std::string& line) {
  if (std::fprintf(file_, "%s\n", line.c_str()) < 0 || std::fflush(file_) != 0) {
    base::fail_errno("--metrics-file " + path_);
  }
}

void write_train_scalars(io::SummarySink& writer, const TrainRecord& r,
                         const TensorboardOptions& options) {
  if (options.log_interval <= 0 || r.iteration % options.log_interval != 0) return;
  const auto iteration = static_cast<double>(r.iteration);
  const auto samples = static_cast<double>(r.consumed_samples);
  const auto tokens = static_cast<double>(r.consumed_tokens);
  writer.add_scalar("steps-vs-samples/y=steps,x=samples", iteration, r.consumed_samples);
  writer.add_scalar("steps-vs-samples/y=samples,x=steps", samples, r.iteration);
  writer.add_scalar("steps-vs-tokens/y=steps,x=tokens", iteration, r.consumed_tokens);
  writer.add_scalar("steps-vs-tokens/y=tokens,x=steps", tokens, r.iteration);
  if (options.log_learning_rate) write_three(writer, "learning-rate/learning-rate", r.lr, r);
  if (options.log_batch_size) {
    const auto batch = static_cast<double>(r.global_batch_size);
    writer.add_scalar("batch-size/batch-size", batch, r.iteration);
    writer.add_scalar("batch-size/batch-size vs samples", batch, r.consumed_samples);
  }
  write_three(writer, "lm-loss-training/lm loss", r.lm_loss, r);
  if (const auto step = step_of(r.gigaflos_no_embeds)) {
    writer.add_scalar("lm-loss-training/lm loss vs gigaflos (without embeddings)", r.lm_loss,
                      *step);
  }
  if (options.log_loss_scale && r.loss_scale) {
    write_three(writer, "loss-scale/loss-scale", *r.loss_scale, r);
  }
  if (r.grad_norm) write_three(writer, "grad-norm/grad-norm", *r.grad_norm, r);
  if (r.num_zeros) write_three(writer, "num-zeros/num-zeros", *r.num_zeros, r);
  if (r.params_norm) write_three(writer, "params-norm/params-norm", *r.params_norm, r);
  if (r.curriculum_seqlen) {
    writer.add_scalar("curriculum_seqlen", static_cast<double>(*r.curriculum_seqlen), r.iteration);
  }
}

void write_throughput_scalars(io::SummarySink& writer, const ThroughputRecord& r,
                              const TensorboardOptions& options) {
  if (!options.log_timers) return;
  const auto replicas = static_cast<double>(std::max<std::int64_t>(r.data_parallel_size, 1));
  const double tokens_per_second = r.samples_per_second * static_cast<double>(r.seq_length);
  writer.add_scalar("iteration-time/iteration-time", r.elapsed_per_iteration, r.iteration);
  writer.add_scalar("iteration-time/iteration-time vs samples", r.elapsed_per_iteration,
                    r.consumed_samples);
  writer.add_scalar("iteration-time/iteration-time vs tokens", r.elapsed_per_iteration,
                    r.consumed_tokens);
  writer.add_scalar("iteration-time/samples per second", r.samples_per_second, r.iteration);
  writer.add_scalar("iteration-time/samples per second per replica",
                    r.samples_per_second / replicas, r.iteration);
  writer.add_scalar("iteration-time/tokens per second", tokens_per_second, r.iteration);
  writer.add_scalar("iteration-time/tokens per second per replica", tokens_per_second / replicas,
                    r.iteration);
  writer.add_scalar("iteration-time/TFLOPs per gpu (estimated)", r.tflops, r.iteration);
}

void write_eval_scalars(io::SummarySink& writer, const EvalRecord& r,
                        const TensorboardOptions& options) {
  const std::string prefix = "lm-loss-validation/" + (r.group.empty() ? r.split : r.group);
  const std::int64_t step = r.split == "test" ? 0 : r.iteration;
  const auto write_four = [&](const std::string& base, double value) {
    writer.add_scalar(base, value, step);
    writer.add_scalar(base + " vs samples", value, r.consumed_train_samples);
    writer.add_scalar(base + " vs tokens", value, r.consumed_train_tokens);
    if (const auto gigaflos = step_of(r.gigaflos_no_embeds)) {
      writer.add_scalar(base + " vs gigaflos (without embeddings)", value, *gigaflos);
    }
  };
  write_four(prefix + "/lm loss validation", r.lm_loss);
  if (options.log_validation_ppl) write_four(prefix + "/lm loss validation ppl", r.ppl);
}

void write_run_start(io::SummarySink& writer,
                     std::span<const std::pair<std::string, std::string>> args,
                     std::int64_t world_size, std::int64_t iteration) {
  for (const auto& [name, value] : args) writer.add_text(name, value, iteration);
  writer.add_scalar("iteration-time/world_size", static_cast<double>(world_size), iteration);
  writer.add_scalar("iteration-time/world_size", 0.0, iteration + 1);
}

void TrainingOutputs::record_train(const TrainRecord& record) const {
  if (metrics) metrics->write_train(record);
  if (tensorboard) write_train_scalars(*tensorboard, record, tensorboard_options);
}

void TrainingOutputs::record_throughput(const ThroughputRecord& record) const {
  if (tensorboard) write_throughput_scalars(*tensorboard, record, tensorboard_options);
}

void TrainingOutputs::record_eval(const EvalRecord& record) const {
  if (metrics) metrics->write_eval(record);
  if (tensorboard) write_eval_scalars(*tensorboard, record, tensorboard_options);
}

}  // namespace mds::train
