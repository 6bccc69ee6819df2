// Scoring of upstream's zero-shot tasks (tasks/zeroshot_gpt/evaluate.py, data.md §6): the summed
// masked cross entropy of the WikiText windows and the exact-match accuracy of LAMBADA's last
// words, with upstream's result lines.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tasks/eval_datasets.h"
#include "tasks/inference_model.h"

namespace mds::tasks {

// Called with each micro-batch's 0-based iteration number before it runs.
using IterationCallback = std::function<void(std::int64_t)>;

struct WikitextResult {
  double total_loss = 0;  // Σ over windows of the scored tokens' losses
  std::int64_t windows = 0;
  std::int64_t num_original_tokens = 0;
  std::int64_t num_tokenized_tokens = 0;
  double avg_loss = 0;      // total / (num_tokenized_tokens − 1)
  double ppl = 0;           // exp(min(20, avg_loss))
  double token_ratio = 0;   // (num_tokenized − 1) / (num_original − 1)
  double adjusted_ppl = 0;  // exp(min(20, avg_loss · token_ratio))
};

// Runs the windows through the training forward (GptModel, no dropout) in micro-batches of
// model.options.micro_batch_size, on model.device when it has one; windows are padded with pad_id
// (EOD). In a T × P grid
// (model.comms) every rank calls this together: each runs its TP shard of its stage, the last
// stage sums the losses and every rank returns that sum.
WikitextResult evaluate_wikitext(const InferenceModel& model, const WikitextData& data,
                                 std::int64_t pad_id, std::optional<std::int64_t> overlapping_eval,
                                 const IterationCallback& on_iteration = {});

struct LambadaResult {
  std::int64_t correct = 0;
  std::int64_t total = 0;
  double accuracy = 0;
};

// An example is correct when the argmax over the (padded) vocabulary equals the target at every
// target position. Examples run one at a time (a micro-batch counts for the iteration callback),
// through GptInference on model.device when it has one.
// In a T × P grid every rank calls this together and returns the last stage's count.
LambadaResult evaluate_lambada(const InferenceModel& model,
                               const std::vector<LambadaExample>& examples,
                               const IterationCallback& on_iteration = {});

// Upstream's three lines: dashes, " validation results on TASK | ... |", dashes.
std::vector<std::string> wikitext_result_lines(const WikitextResult& result);
std::vector<std::string> lambada_result_lines(const LambadaResult& result);

// One JSON object (one line) with the task, the input, the checkpoint and every number.
std::string wikitext_result_json(const WikitextResult& result, const std::string& valid_data,
                                 const std::string& checkpoint);
std::string lambada_result_json(const LambadaResult& result, const std::string& valid_data,
                                const std::string& checkpoint, bool strict);

}  // namespace mds::tasks
