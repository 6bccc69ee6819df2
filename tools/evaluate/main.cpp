// evaluate: zero-shot evaluation of a checkpoint on WikiText (loss, perplexity) or LAMBADA
// (last-word accuracy) with upstream's flags and result lines (tasks/main.py; data.md §6). One
// process, or T × P ranks (times D replicas splitting the data) under mpirun/srun, each running
// its shard of the model on the host or a CUDA device (--device, --distributed-backend); rank 0
// prints.
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/log.h"
#include "base/program.h"
#include "ops/cpu/local_rank_threads.h"
#include "tasks/eval_datasets.h"
#include "tasks/inference_comms.h"
#include "tasks/inference_device.h"
#include "tasks/inference_model.h"
#include "tasks/task_args.h"
#include "tasks/zero_shot.h"
#include "text/tokenizer_factory.h"

namespace {

using namespace mds;

void write_results(const std::string& path, const std::string& json) {
  const std::string text = json + "\n";
  base::AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

int run(int argc, char** argv, tasks::InferenceProcesses& processes) {
  tasks::EvaluateArgs args = tasks::parse_evaluate_args(argc, argv);
  std::FILE* quiet = nullptr;
  const int status = base::run_program("evaluate", [&] {
    processes.detect();
    // Rank 0 prints; errors reach stderr from every rank.
    if (!processes.output_rank()) {
      quiet = std::fopen("/dev/null", "w");
      if (quiet == nullptr) base::fail("cannot open /dev/null for rank output");
    }
    const base::Log log("evaluate", quiet ? quiet : stdout, quiet ? quiet : stderr);
    if (const auto note = ops::cpu::share_cpus_among_local_ranks(processes.local_size()))
      log.note(*note);
    tasks::validate_evaluate_args(args);
    const tensor::Device device =
        tasks::choose_inference_device(args.model, processes.local_rank(), log);
    const std::string& path = args.valid_data->front();
    const std::unique_ptr<text::Tokenizer> tokenizer = text::build_tokenizer(args.model.tokenizer);
    if (!tokenizer->eod()) base::fail("the tokenizer has no end-of-document token to pad with");
    const std::int64_t eod = *tokenizer->eod();
    const std::int64_t log_interval = std::max<std::int64_t>(1, args.model.log_interval);
    const auto on_iteration = [&](std::int64_t iteration) {
      if (iteration % log_interval == 0) {
        log.info("> working on iteration: " + std::to_string(iteration));
      }
    };

    // Read the data before the (larger) model so that a bad input file fails fast.
    std::optional<tasks::WikitextData> wikitext;
    std::vector<tasks::LambadaExample> examples;
    if (args.task == "WIKITEXT103") {
      wikitext = tasks::read_wikitext(path, *tokenizer);
      log.info(" > number of original tokens: " + std::to_string(wikitext->num_original_tokens) +
               ", number of detokenized tokens: " + std::to_string(wikitext->num_tokenized_tokens));
    } else {
      log.info("> building lambada dataset from " + path + " ...");
      examples = tasks::read_lambada(path, *tokenizer, args.strict_lambada);
      log.info(" > found " + std::to_string(examples.size()) + " samples.");
    }
    std::optional<tasks::InferenceModel> opened =
        tasks::open_inference_model(processes, args.model, *tokenizer, device, log,
                                    /*data_parallel=*/true);
    if (!opened) return;  // not rank 0 of a grid that does not fit: rank 0 reports it
    const tasks::InferenceModel& model = *opened;

    std::vector<std::string> lines;
    std::string json;
    // The evaluation alone, without start-up and loading: what a throughput comparison needs.
    const auto start = std::chrono::steady_clock::now();
    const auto elapsed = [&] {
      return std::to_string(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    };
    if (wikitext) {
      const tasks::WikitextResult result =
          tasks::evaluate_wikitext(model, *wikitext, eod, args.overlapping_eval, on_iteration);
      log.note("evaluated " + std::to_string(result.windows) + " windows in " + elapsed() + " s");
      lines = tasks::wikitext_result_lines(result);
      json = tasks::wikitext_result_json(result, path, model.checkpoint);
    } else {
      const tasks::LambadaResult result = tasks::evaluate_lambada(model, examples, on_iteration);
      log.note("evaluated " + std::to_string(examples.size()) + " samples in " + elapsed() + " s");
      lines = tasks::lambada_result_lines(result);
      json = tasks::lambada_result_json(result, path, model.checkpoint, args.strict_lambada);
    }
    for (const std::string& line : lines) log.info(line);
    if (args.results_file && processes.output_rank()) write_results(*args.results_file, json);
    log.info("done :-)");
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
