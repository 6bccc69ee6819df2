// Writes a TensorBoard event file through train/metrics_log's upstream scalars plus a few edge
// values, and prints what it wrote (one JSON object a line) for
// tests/e2e/tensorboard_oracle_test.py to compare with its own reading of the file.
//
//   tensorboard_probe LOG_DIR [--simple-value]
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "io/tensorboard_writer.h"
#include "train/metrics_log.h"

namespace {

using mds::io::SummarySink;

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string json_double(double value) {
  if (std::isnan(value)) return "\"nan\"";
  if (std::isinf(value)) return value > 0 ? "\"inf\"" : "\"-inf\"";
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

// Forwards to the writer and prints each summary.
class Tee : public SummarySink {
 public:
  explicit Tee(SummarySink& writer) : writer_(writer) {}
  void add_scalar(std::string_view tag, double value, std::int64_t step) override {
    writer_.add_scalar(tag, value, step);
    std::printf("{\"kind\":\"scalar\",\"tag\":%s,\"value\":%s,\"step\":%lld}\n",
                json_string(tag).c_str(), json_double(value).c_str(), static_cast<long long>(step));
  }
  void add_text(std::string_view tag, std::string_view text, std::int64_t step) override {
    writer_.add_text(tag, text, step);
    std::printf("{\"kind\":\"text\",\"tag\":%s,\"text\":%s,\"step\":%lld}\n",
                json_string(tag).c_str(), json_string(text).c_str(), static_cast<long long>(step));
  }

 private:
  SummarySink& writer_;
};

void write_all(SummarySink& sink) {
  const std::vector<std::pair<std::string, std::string>> args = {
      {"seed", "1234"}, {"data_path", "['1.0', 'data/my corpus']"}};
  mds::train::write_run_start(sink, args, 2, 0);

  mds::train::TensorboardOptions options;
  options.log_batch_size = true;
  options.log_validation_ppl = true;
  options.log_timers = true;
  for (std::int64_t iteration = 1; iteration <= 3; ++iteration) {
    mds::train::TrainRecord r;
    r.iteration = iteration;
    r.consumed_samples = 8 * iteration;
    r.consumed_tokens = 1024 * iteration;
    r.lm_loss = 11.0 - 0.37 * static_cast<double>(iteration);
    r.lr = 1.5e-4 * static_cast<double>(iteration) / 3.0;
    r.global_batch_size = 8;
    r.grad_norm = 2.25 / static_cast<double>(iteration);
    r.loss_scale = 4096.0;
    r.num_zeros = 0.0;
    r.gigaflos_no_embeds = 0.61 * static_cast<double>(iteration);
    mds::train::write_train_scalars(sink, r, options);
  }
  mds::train::ThroughputRecord throughput;
  throughput.iteration = 3;
  throughput.consumed_samples = 24;
  throughput.consumed_tokens = 3072;
  throughput.elapsed_per_iteration = 0.125;
  throughput.samples_per_second = 64;
  throughput.data_parallel_size = 2;
  throughput.seq_length = 128;
  throughput.tflops = 0.5;
  mds::train::write_throughput_scalars(sink, throughput, options);

  mds::train::EvalRecord eval;
  eval.iteration = 3;
  eval.lm_loss = 9.75;
  eval.ppl = std::exp(9.75);
  eval.consumed_train_samples = 24;
  eval.consumed_train_tokens = 3072;
  eval.gigaflos_no_embeds = 1.83;
  mds::train::write_eval_scalars(sink, eval, options);
  eval.split = "test";
  mds::train::write_eval_scalars(sink, eval, options);

  // Edge values: zero, negative, non-finite, beyond float range, huge and negative steps, a
  // non-ASCII tag.
  sink.add_scalar("edge/zero", 0.0, 0);
  sink.add_scalar("edge/negative", -3.25, 7);
  sink.add_scalar("edge/nan", std::nan(""), 8);
  sink.add_scalar("edge/huge", 1e300, 9);
  sink.add_scalar("edge/steps", 1.0, std::int64_t{1} << 40);
  sink.add_scalar("edge/steps", 2.0, -3);
  sink.add_scalar("edge/\xc3\xbc-loss", 0.1, 10);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && std::string_view(argv[2]) != "--simple-value")) {
    std::fprintf(stderr, "usage: tensorboard_probe LOG_DIR [--simple-value]\n");
    return 2;
  }
  try {
    const auto style =
        argc == 3 ? mds::io::ScalarStyle::kSimpleValue : mds::io::ScalarStyle::kTensor;
    mds::io::TensorboardWriter writer(argv[1], style);
    Tee tee(writer);
    write_all(tee);
    std::printf("{\"kind\":\"file\",\"path\":%s}\n", json_string(writer.path()).c_str());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tensorboard_probe: %s\n", error.what());
    return 1;
  }
  return 0;
}
