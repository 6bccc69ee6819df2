// generate: text from a GPT checkpoint with upstream's flags (tools/generate_samples_gpt.py;
// data.md §7): unconditional JSON-lines samples, continuations of prompts read from a file or
// standard input, or an interactive prompt on a terminal. Decoding uses a KV cache and runs
// --micro-batch-size samples or prompts together; see docs/generate.md for the differences. One
// process, or T × P × D ranks under mpirun/srun (D replicas of T × P ranks, each decoding every
// D-th batch), each running its shard of the model on the host or a CUDA device (--device,
// --distributed-backend); rank 0 writes.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/log.h"
#include "base/mapped_file.h"
#include "base/program.h"
#include "ops/cpu/local_rank_threads.h"
#include "tasks/generation.h"
#include "tasks/gpt_inference.h"
#include "tasks/inference_comms.h"
#include "tasks/inference_device.h"
#include "tasks/inference_model.h"
#include "tasks/replica_items.h"
#include "tasks/sample_output.h"
#include "tasks/task_args.h"
#include "text/tokenizer_factory.h"
#include "text/utf8.h"

namespace {

using namespace mds;

// Standard output, or a file replaced all at once when the run succeeds; nothing on ranks other
// than the output rank.
class Output {
 public:
  Output(const std::optional<std::string>& path, bool enabled) : enabled_(enabled) {
    if (enabled && path && *path != "-") file_ = std::make_unique<base::AtomicFile>(*path);
  }
  void write(const std::string& text) {
    if (!enabled_) return;
    if (file_) {
      file_->write(text.data(), text.size());
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
  }
  void commit() {
    if (file_) file_->commit();
  }

 private:
  bool enabled_;
  std::unique_ptr<base::AtomicFile> file_;
};

struct Generator {
  const tasks::GenerateArgs& args;
  const text::Tokenizer& tokenizer;
  const tasks::GptInference& model;
  tasks::GenerationOptions options;
};

tasks::GenerationOptions generation_options(const tasks::GenerateArgs& args,
                                            const tasks::InferenceModel& model, std::int64_t eod) {
  tasks::GenerationOptions o;
  o.sampling.greedy = args.greedy;
  o.sampling.temperature = args.temperature;
  o.sampling.top_k = args.top_k;
  o.sampling.top_p = args.top_p;
  o.seed = static_cast<std::uint64_t>(args.model.seed);
  o.seq_length = *args.model.seq_length;
  o.out_seq_length = args.out_seq_length;
  o.eod = eod;
  o.vocab_size = model.vocab_size;
  o.recompute = args.recompute;
  return o;
}

// Logs upstream's "Avg s/batch" line whenever the samples written cross a multiple of
// --log-interval, and after the last.
class BatchTimer {
 public:
  BatchTimer(const base::Log& log, std::int64_t interval, std::int64_t total)
      : log_(log), interval_(std::max<std::int64_t>(1, interval)), total_(total) {}
  void written(std::int64_t before, std::int64_t done) {
    ++batches_;
    if (done / interval_ == before / interval_ && done != total_) return;
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - start_).count();
    log_.note("Avg s/batch: " + std::to_string(seconds / static_cast<double>(batches_)) + " (" +
              std::to_string(done) + "/" + std::to_string(total_) + " samples)");
    start_ = now;
    batches_ = 0;
  }

 private:
  const base::Log& log_;
  std::int64_t interval_, total_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::int64_t batches_ = 0;
};

void unconditional(Generator& g, const base::Log& log) {
  Output out(g.args.genfile, g.model.comms().output_rank());
  const std::int64_t total = g.args.num_samples, batch = g.args.model.micro_batch_size;
  const std::int64_t batches = (total + batch - 1) / batch;
  BatchTimer timer(log, g.args.model.log_interval, total);
  // Batch k holds samples [k·batch, (k + 1)·batch); with D replicas, replica k mod D decodes it.
  tasks::run_items_on_replicas(
      g.model.comms(), batches,
      [&](std::int64_t k) {
        std::vector<tasks::GenerationRow> rows;
        for (std::int64_t i = k * batch; i < std::min(total, (k + 1) * batch); ++i) {
          rows.push_back({{g.options.eod}, static_cast<std::uint64_t>(i)});
        }
        std::string text;
        for (const tasks::GenerationResult& result : tasks::generate(g.model, rows, g.options)) {
          text += tasks::unconditional_json_line(result, g.tokenizer) + "\n";
        }
        return text;
      },
      [&](std::int64_t k, const std::string& text) {
        out.write(text);
        timer.written(k * batch, std::min(total, (k + 1) * batch));
      });
  out.commit();
}

// Line number (from 1) of byte `offset`, with \r\n, \r and \n each ending a line.
std::size_t line_of(std::string_view content, std::size_t offset) {
  std::size_t line = 1;
  for (std::size_t i = 0; i < offset; ++i) {
    const bool crlf = content[i] == '\r' && i + 1 < content.size() && content[i + 1] == '\n';
    if (content[i] == '\n' || (content[i] == '\r' && !crlf)) ++line;
  }
  return line;
}

// Upstream reads the prompts in Python's text mode, which raises before the first prompt when the
// file is not UTF-8: the whole file is checked here too, and the error names its line.
void require_utf8(const std::string& path, std::string_view content) {
  const std::optional<std::size_t> bad = text::find_invalid_utf8(content);
  if (!bad) return;
  base::fail(path == "-" ? std::string("standard input") : path, ":", line_of(content, *bad),
             ": not valid UTF-8 (byte ", *bad, " of the prompts)");
}

// Before the checkpoint is loaded: a missing or non-UTF-8 prompt file fails at once.
void check_prompt_file(const std::string& path) {
  if (!base::file_exists(path)) base::fail("--sample-input-file ", path, ": no such file");
  require_utf8(path, base::MappedFile(path).bytes());
}

// Lines as Python's text mode reads them: \r\n and \r become \n, which stays on the line.
// Standard input is rank 0's, shared with the other ranks.
std::vector<std::string> read_prompt_lines(const std::string& path,
                                           const tasks::InferenceComms& comms) {
  std::string content;
  if (path == "-") {
    if (comms.output_rank()) {
      content.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    comms.share_from_rank0(content);
  } else {
    content = std::string(base::MappedFile(path).bytes());  // checked by check_prompt_file
  }
  if (path == "-") require_utf8(path, content);
  std::vector<std::string> lines;
  std::string line;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const char c = content[i];
    if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < content.size() && content[i + 1] == '\n') ++i;
      lines.push_back(line + "\n");
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

// Tokenizes a prompt; nullopt (with upstream's message) when it is empty or too long.
std::optional<std::vector<std::int64_t>> prompt_tokens(const Generator& g, const std::string& text,
                                                       const base::Log& log) {
  const std::vector<std::int32_t> ids = g.tokenizer.encode(text);
  const std::int64_t length = static_cast<std::int64_t>(ids.size());
  if (length == 0) {
    log.warn("an empty prompt is skipped");
    return std::nullopt;
  }
  if (length >= *g.args.model.seq_length / 2) {
    log.warn("Context length " + std::to_string(length) +
             ": Please give smaller context (half of the sequence length)!");
    return std::nullopt;
  }
  return std::vector<std::int64_t>(ids.begin(), ids.end());
}

// The prompts' batches: up to --micro-batch-size usable lines each (empty and too long ones
// skipped with upstream's message), each row keyed by its line number.
struct PromptBatch {
  std::vector<tasks::GenerationRow> rows;
  std::vector<std::size_t> lines;
};

std::vector<PromptBatch> prompt_batches(const Generator& g, const std::vector<std::string>& lines,
                                        const base::Log& log) {
  const std::size_t batch = static_cast<std::size_t>(g.args.model.micro_batch_size);
  std::vector<PromptBatch> batches;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto tokens = prompt_tokens(g, lines[i], log);
    if (!tokens) continue;
    if (batches.empty() || batches.back().rows.size() == batch) batches.emplace_back();
    batches.back().rows.push_back({*tokens, static_cast<std::uint64_t>(i)});
    batches.back().lines.push_back(i);
  }
  return batches;
}

void from_prompts(Generator& g, const std::string& input, const base::Log& log) {
  const std::vector<std::string> lines = read_prompt_lines(input, g.model.comms());
  Output out(g.args.sample_output_file, g.model.comms().output_rank());
  const std::vector<PromptBatch> batches = prompt_batches(g, lines, log);
  tasks::run_items_on_replicas(
      g.model.comms(), static_cast<std::int64_t>(batches.size()),
      [&](std::int64_t k) {
        const PromptBatch& batch = batches[static_cast<std::size_t>(k)];
        const std::vector<tasks::GenerationResult> results =
            tasks::generate(g.model, batch.rows, g.options);
        std::string text;
        for (std::size_t r = 0; r < results.size(); ++r) {
          text += tasks::conditional_record(lines[batch.lines[r]], results[r], g.tokenizer);
        }
        return text;
      },
      [&](std::int64_t, const std::string& text) { out.write(text); });
  out.commit();
}

void interactive(Generator& g, const base::Log& log) {
  for (std::uint64_t count = 0;; ++count) {
    std::string text;
    do {
      std::printf("\nContext prompt (stop to exit) >>> ");
      std::fflush(stdout);
      if (!std::getline(std::cin, text)) return;
      if (text.empty()) std::printf("Prompt should not be empty!\n");
    } while (text.empty());
    if (text.find("stop") != std::string::npos) return;
    if (text::find_invalid_utf8(text)) {
      log.warn("the prompt is not valid UTF-8: skipped");
      continue;
    }
    const auto tokens = prompt_tokens(g, text, log);
    if (!tokens) continue;
    const tasks::GenerationResult result =
        tasks::generate(g.model, {{*tokens, count}}, g.options)[0];
    const std::string record = tasks::conditional_record(text, result, g.tokenizer);
    // "\nContext:<prompt>\n\nMegatron-LM:<text>\n" shown as upstream prints it.
    std::printf("\nContext: %s\n\nMegatron-LM: %s\n", text.c_str(),
                record.substr(record.find("\n\nMegatron-LM:") + 14).c_str());
  }
}

// The mode of a run without --num-samples and --sample-input-file: upstream's interactive prompt
// when standard input is a terminal on one process, else prompts read from it (under
// mpirun/srun only rank 0 has it: every rank reads what rank 0 reads until its end).
bool interactive_mode(const tasks::InferenceProcesses& processes) {
  return processes.world_size() == 1 && isatty(STDIN_FILENO);
}

int run(int argc, char** argv, tasks::InferenceProcesses& processes) {
  tasks::GenerateArgs args = tasks::parse_generate_args(argc, argv);
  std::FILE* quiet = nullptr;
  const int status = base::run_program("generate", [&] {
    processes.detect();
    // Rank 0 writes the samples and logs; errors reach stderr from every rank.
    if (!processes.output_rank()) {
      quiet = std::fopen("/dev/null", "w");
      if (quiet == nullptr) base::fail("cannot open /dev/null for rank output");
    }
    const base::Log log("generate", quiet ? quiet : stderr, quiet ? quiet : stderr);
    if (const auto note = ops::cpu::share_cpus_among_local_ranks(processes.local_size()))
      log.note(*note);
    tasks::validate_generate_args(args);
    if (args.sample_input_file && *args.sample_input_file != "-") {
      check_prompt_file(*args.sample_input_file);
    }
    const tensor::Device device =
        tasks::choose_inference_device(args.model, processes.local_rank(), log);
    const std::unique_ptr<text::Tokenizer> tokenizer = text::build_tokenizer(args.model.tokenizer);
    if (!tokenizer->eod()) base::fail("the tokenizer has no end-of-document token");
    std::optional<tasks::InferenceModel> opened =
        tasks::open_inference_model(processes, args.model, *tokenizer, device, log,
                                    /*data_parallel=*/true);
    if (!opened) return;  // not rank 0 of a grid that does not fit: rank 0 reports it
    const tasks::InferenceModel& model = *opened;
    const tasks::GptInference inference(model.options, *model.table, *model.params, model.comms,
                                        model.device.get());
    Generator g{args, *tokenizer, inference, generation_options(args, model, *tokenizer->eod())};
    if (args.num_samples > 0) {
      unconditional(g, log);
    } else if (args.sample_input_file) {
      from_prompts(g, *args.sample_input_file, log);
    } else if (interactive_mode(processes)) {
      interactive(g, log);
    } else {
      from_prompts(g, "-", log);
    }
  });
  if (quiet != nullptr) std::fclose(quiet);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  mds::tasks::InferenceProcesses processes;
  const int status = run(argc, argv, processes);
  // One failed rank stops the job instead of leaving the others waiting for it.
  if (status != 0) processes.abort_job(status);
  return status;
}
