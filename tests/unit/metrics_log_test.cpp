// The JSON-lines metrics file and the TensorBoard scalars: exactly the tags, values and x-axes
// megatron/training.py (training_log, evaluate_and_print_results) and megatron/initialize.py write.
#include "train/metrics_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "test_support.h"

namespace mds::train {
namespace {

using testing_support::read_file;
using testing_support::ScratchDir;

struct Written {
  std::string tag;
  double value;
  std::int64_t step;
  bool operator==(const Written&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Written& w) {
  return out << "{" << w.tag << ", " << w.value << ", " << w.step << "}";
}

class RecordingSink : public io::SummarySink {
 public:
  void add_scalar(std::string_view tag, double value, std::int64_t step) override {
    written.push_back({std::string(tag), value, step});
  }
  void add_text(std::string_view tag, std::string_view text, std::int64_t step) override {
    texts.push_back({std::string(tag) + "=" + std::string(text), 0.0, step});
  }
  std::vector<Written> written;
  std::vector<Written> texts;
};

TrainRecord fp16_record() {
  TrainRecord r;
  r.iteration = 4;
  r.consumed_samples = 32;
  r.consumed_tokens = 4096;
  r.lm_loss = 10.123456789012;
  r.lr = 0.00015;
  r.global_batch_size = 8;
  r.grad_norm = 1.75;
  r.loss_scale = 65536.0;
  r.num_zeros = 0.0;
  r.elapsed_seconds = 0.25;
  r.samples_per_second = 32.0;
  r.tflops = 0.125;
  r.gigaflos_no_embeds = 12.7;
  return r;
}

TEST(MetricsJson, TrainLine) {
  EXPECT_EQ(format_train_json(fp16_record()),
            R"({"type":"train","iteration":4,"consumed_samples":32,"consumed_tokens":4096,)"
            R"("lm_loss":10.1234568,"lr":0.00015,"global_batch_size":8,"grad_norm":1.75,)"
            R"("loss_scale":65536,"skipped":false,"elapsed_s":0.25,"samples_per_second":32,)"
            R"("tflops":0.125})");
  TrainRecord odd = fp16_record();
  odd.lm_loss = std::nan("");
  odd.grad_norm.reset();
  odd.loss_scale.reset();
  odd.samples_per_second = std::numeric_limits<double>::infinity();
  odd.skipped = true;
  const std::string line = format_train_json(odd);
  EXPECT_NE(line.find(R"("lm_loss":null,)"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("grad_norm":null,"loss_scale":null,"skipped":true,)"), std::string::npos)
      << line;
  EXPECT_NE(line.find(R"("samples_per_second":null,)"), std::string::npos) << line;
}

TEST(MetricsJson, EvalLines) {
  EvalRecord valid;
  valid.iteration = 10;
  valid.lm_loss = 2.0;
  valid.ppl = std::exp(2.0);
  EXPECT_EQ(format_eval_json(valid),
            R"({"type":"valid","iteration":10,"lm_loss":2,"ppl":7.38905609893065})");
  EvalRecord test = valid;
  test.split = "test";
  test.group = "test";
  test.lm_loss = std::numeric_limits<double>::infinity();
  EXPECT_EQ(format_eval_json(test),
            R"({"type":"test","iteration":10,"lm_loss":null,"ppl":7.38905609893065})");
  EvalRecord named = valid;
  named.group = "wiki \"en\"";
  EXPECT_EQ(format_eval_json(named), R"({"type":"valid","name":"wiki \"en\"","iteration":10,)"
                                     R"("lm_loss":2,"ppl":7.38905609893065})");
}

TEST(MetricsLog, AppendsFlushedLines) {
  ScratchDir dir;
  const std::string path = dir.file("metrics.jsonl");
  EvalRecord eval;
  eval.iteration = 4;
  {
    MetricsLog log(path);
    log.write_train(fp16_record());
    // Visible before the log is closed: each line is flushed.
    EXPECT_EQ(read_file(path), format_train_json(fp16_record()) + "\n");
  }
  {
    MetricsLog resumed(path);
    resumed.write_eval(eval);
  }
  EXPECT_EQ(read_file(path),
            format_train_json(fp16_record()) + "\n" + format_eval_json(eval) + "\n");
  EXPECT_THROW(MetricsLog(dir.file("missing/metrics.jsonl")), base::Error);
}

TEST(TensorboardScalars, TrainingIterationAsUpstream) {
  RecordingSink sink;
  write_train_scalars(sink, fp16_record(), TensorboardOptions{});
  const double lr = 0.00015, loss = 10.123456789012;
  const std::vector<Written> want = {
      {"steps-vs-samples/y=steps,x=samples", 4, 32},
      {"steps-vs-samples/y=samples,x=steps", 32, 4},
      {"steps-vs-tokens/y=steps,x=tokens", 4, 4096},
      {"steps-vs-tokens/y=tokens,x=steps", 4096, 4},
      {"learning-rate/learning-rate", lr, 4},
      {"learning-rate/learning-rate vs samples", lr, 32},
      {"learning-rate/learning-rate vs tokens", lr, 4096},
      {"lm-loss-training/lm loss", loss, 4},
      {"lm-loss-training/lm loss vs samples", loss, 32},
      {"lm-loss-training/lm loss vs tokens", loss, 4096},
      {"lm-loss-training/lm loss vs gigaflos (without embeddings)", loss, 12},
      {"loss-scale/loss-scale", 65536, 4},
      {"loss-scale/loss-scale vs samples", 65536, 32},
      {"loss-scale/loss-scale vs tokens", 65536, 4096},
      {"grad-norm/grad-norm", 1.75, 4},
      {"grad-norm/grad-norm vs samples", 1.75, 32},
      {"grad-norm/grad-norm vs tokens", 1.75, 4096},
      {"num-zeros/num-zeros", 0, 4},
      {"num-zeros/num-zeros vs samples", 0, 32},
      {"num-zeros/num-zeros vs tokens", 0, 4096},
  };
  EXPECT_EQ(sink.written, want);
}

TEST(TensorboardScalars, TrainingFlagsAndInterval) {
  TensorboardOptions options;
  options.log_interval = 2;
  options.log_learning_rate = false;
  options.log_loss_scale = false;
  options.log_batch_size = true;
  TrainRecord r = fp16_record();
  r.num_zeros.reset();
  r.grad_norm.reset();
  r.params_norm = 3.5;
  r.curriculum_seqlen = 64;
  RecordingSink sink;
  write_train_scalars(sink, r, options);
  std::vector<std::string> tags;
  for (const auto& w : sink.written) tags.push_back(w.tag);
  EXPECT_EQ(tags, (std::vector<std::string>{
                      "steps-vs-samples/y=steps,x=samples",
                      "steps-vs-samples/y=samples,x=steps",
                      "steps-vs-tokens/y=steps,x=tokens",
                      "steps-vs-tokens/y=tokens,x=steps",
                      "batch-size/batch-size",
                      "batch-size/batch-size vs samples",
                      "lm-loss-training/lm loss",
                      "lm-loss-training/lm loss vs samples",
                      "lm-loss-training/lm loss vs tokens",
                      "lm-loss-training/lm loss vs gigaflos (without embeddings)",
                      "params-norm/params-norm",
                      "params-norm/params-norm vs samples",
                      "params-norm/params-norm vs tokens",
                      "curriculum_seqlen",
                  }));
  EXPECT_EQ(sink.written[4], (Written{"batch-size/batch-size", 8, 4}));
  EXPECT_EQ(sink.written[5], (Written{"batch-size/batch-size vs samples", 8, 32}));
  EXPECT_EQ(sink.written.back(), (Written{"curriculum_seqlen", 64, 4}));

  RecordingSink off_interval;
  r.iteration = 5;
  write_train_scalars(off_interval, r, options);
  EXPECT_TRUE(off_interval.written.empty());
}

TEST(TensorboardScalars, ThroughputOnlyWithTimers) {
  ThroughputRecord r;
  r.iteration = 100;
  r.consumed_samples = 800;
  r.consumed_tokens = 102400;
  r.elapsed_per_iteration = 0.5;
  r.samples_per_second = 16;
  r.data_parallel_size = 4;
  r.seq_length = 128;
  r.tflops = 1.25;
  RecordingSink off;
  write_throughput_scalars(off, r, TensorboardOptions{});
  EXPECT_TRUE(off.written.empty());
  TensorboardOptions options;
  options.log_timers = true;
  RecordingSink sink;
  write_throughput_scalars(sink, r, options);
  const std::vector<Written> want = {
      {"iteration-time/iteration-time", 0.5, 100},
      {"iteration-time/iteration-time vs samples", 0.5, 800},
      {"iteration-time/iteration-time vs tokens", 0.5, 102400},
      {"iteration-time/samples per second", 16, 100},
      {"iteration-time/samples per second per replica", 4, 100},
      {"iteration-time/tokens per second", 2048, 100},
      {"iteration-time/tokens per second per replica", 512, 100},
      {"iteration-time/TFLOPs per gpu (estimated)", 1.25, 100},
  };
  EXPECT_EQ(sink.written, want);
}

TEST(TensorboardScalars, EvaluationAsUpstream) {
  EvalRecord r;
  r.iteration = 10;
  r.lm_loss = 2.0;
  r.ppl = 7.5;
  r.consumed_train_samples = 80;
  r.consumed_train_tokens = 10240;
  r.gigaflos_no_embeds = 3.9;
  RecordingSink plain;
  write_eval_scalars(plain, r, TensorboardOptions{});
  const std::string p = "lm-loss-validation/valid/lm loss validation";
  EXPECT_EQ(plain.written, (std::vector<Written>{
                               {p, 2, 10},
                               {p + " vs samples", 2, 80},
                               {p + " vs tokens", 2, 10240},
                               {p + " vs gigaflos (without embeddings)", 2, 3},
                           }));
  TensorboardOptions options;
  options.log_validation_ppl = true;
  RecordingSink with_ppl;
  write_eval_scalars(with_ppl, r, options);
  ASSERT_EQ(with_ppl.written.size(), 8u);
  EXPECT_EQ(with_ppl.written[4], (Written{p + " ppl", 7.5, 10}));
  EXPECT_EQ(with_ppl.written[7], (Written{p + " ppl vs gigaflos (without embeddings)", 7.5, 3}));

  // Upstream evaluates the test split with iteration 0; a named group replaces the split name.
  r.split = "test";
  r.group = "held-out";
  RecordingSink test;
  write_eval_scalars(test, r, TensorboardOptions{});
  ASSERT_EQ(test.written.size(), 4u);
  EXPECT_EQ(test.written[0], (Written{"lm-loss-validation/held-out/lm loss validation", 2, 0}));
  EXPECT_EQ(test.written[1].step, 80);
}

TEST(TensorboardScalars, RunStart) {
  RecordingSink sink;
  const std::vector<std::pair<std::string, std::string>> args = {{"seed", "1234"},
                                                                 {"lr", "0.0001"}};
  write_run_start(sink, args, 8, 100);
  EXPECT_EQ(sink.texts, (std::vector<Written>{{"seed=1234", 0, 100}, {"lr=0.0001", 0, 100}}));
  EXPECT_EQ(sink.written, (std::vector<Written>{{"iteration-time/world_size", 8, 100},
                                                {"iteration-time/world_size", 0, 101}}));
}

TEST(TrainingOutputs, FeedsEveryConfiguredOutput) {
  ScratchDir dir;
  TrainingOutputs outputs;
  outputs.metrics = std::make_unique<MetricsLog>(dir.file("m.jsonl"));
  auto sink = std::make_unique<RecordingSink>();
  RecordingSink* recorded = sink.get();
  outputs.tensorboard = std::move(sink);
  outputs.record_train(fp16_record());
  EvalRecord eval;
  outputs.record_eval(eval);
  outputs.record_throughput(ThroughputRecord{});  // no timers: nothing
  EXPECT_EQ(recorded->written.size(), 20u + 4u);
  EXPECT_EQ(read_file(dir.file("m.jsonl")),
            format_train_json(fp16_record()) + "\n" + format_eval_json(eval) + "\n");
  TrainingOutputs none;  // nothing configured: nothing to do, no failure
  none.record_train(fp16_record());
  none.record_eval(eval);
}

}  // namespace
}  // namespace mds::train
