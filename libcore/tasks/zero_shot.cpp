#include "tasks/zero_shot.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/python_float.h"
#include "model/gpt_model.h"
#include "tasks/gpt_inference.h"
#include "tasks/json_text.h"
#include "tasks/python_text.h"
#include "tasks/sampling.h"

namespace mds::tasks {

using tensor::DType;
using tensor::Tensor;

namespace {

// One micro-batch through this rank's pipeline stage: the first stage embeds the tokens, the
// others receive the previous stage's output, and all but the last send theirs on. The last
// stage writes each token's loss into `token_losses` ([b, s]).
void forward_window_batch(model::GptModel& gpt, const InferenceModel& model,
                          const model::MicroBatch& batch, const Tensor& token_losses) {
  model::DropoutContext no_dropout;
  no_dropout.training = false;
  const InferenceComms& comms = model.comms;
  if (comms.pp_size == 1) {
    gpt.forward_loss(*model.params, batch, no_dropout, token_losses);
    return;
  }
  const Tensor& input = gpt.stage_input(0);
  const Tensor& output = gpt.stage_output(0);
  if (!comms.first_stage()) comms.recv_from_previous_stage(input);
  gpt.forward_stage(0, *model.params, batch, no_dropout, comms.first_stage() ? Tensor{} : input,
                    comms.last_stage() ? Tensor{} : output);
  if (comms.last_stage()) {
    gpt.copy_token_losses(0, token_losses);
  } else {
    comms.send_to_next_stage(output);
  }
}

}  // namespace

WikitextResult evaluate_wikitext(const InferenceModel& model, const WikitextData& data,
                                 std::int64_t pad_id, std::optional<std::int64_t> overlapping_eval,
                                 const IterationCallback& on_iteration) {
  const std::int64_t s = model.options.config.seq_length;
  const std::int64_t b = model.options.micro_batch_size;
  const LmWindows windows(data.tokens, s, pad_id, overlapping_eval);
  model::GptModel gpt(model.options, *model.table, model.comms.tp, 1, model.device.get());

  const std::size_t n = static_cast<std::size_t>(b * s);
  std::vector<std::int64_t> tokens(n), labels(n), positions(n);
  std::vector<float> mask(n), losses(n);
  for (std::size_t i = 0; i < n; ++i) positions[i] = static_cast<std::int64_t>(i) % s;
  model::MicroBatch batch;
  batch.tokens = Tensor(tokens.data(), DType::kInt64, {b, s});
  batch.labels = Tensor(labels.data(), DType::kInt64, {b, s});
  batch.position_ids = Tensor(positions.data(), DType::kInt64, {b, s});
  batch.loss_mask = Tensor(mask.data(), DType::kFloat32, {b, s});
  const Tensor token_losses(losses.data(), DType::kFloat32, {b, s});

  WikitextResult result;
  result.windows = windows.size();
  // Replica r takes micro-batches r, r + D, r + 2D, ...: every window once (upstream's
  // DistributedSampler repeats a few to even out the ranks).
  const InferenceComms& comms = model.comms;
  const std::int64_t stride = b * comms.dp_size;
  std::int64_t iteration = 0;
  for (std::int64_t first = comms.dp_rank * b; first < windows.size(); first += stride) {
    if (on_iteration) on_iteration(iteration++);
    // A short last micro-batch is filled with unscored padding rows.
    std::fill(tokens.begin(), tokens.end(), pad_id);
    std::fill(labels.begin(), labels.end(), pad_id);
    std::fill(mask.begin(), mask.end(), 0.0f);
    for (std::int64_t row = 0; row < b && first + row < windows.size(); ++row) {
      const EvalSample sample = windows.window(first + row);
      for (std::int64_t p = 0; p < s; ++p) {
        const std::size_t at = static_cast<std::size_t>(row * s + p);
        tokens[at] = sample.tokens[static_cast<std::size_t>(p)];
        labels[at] = sample.tokens[static_cast<std::size_t>(p + 1)];
        mask[at] = sample.pad_mask[static_cast<std::size_t>(p)];
      }
    }
    forward_window_batch(gpt, model, batch, token_losses);
    if (!model.comms.last_stage()) continue;
    for (std::size_t i = 0; i < n; ++i) {
      if (mask[i] != 0.0f) result.total_loss += static_cast<double>(losses[i]);
    }
  }
  // Each replica's last stage summed its losses; every rank reports the sum over replicas.
  const Tensor total(&result.total_loss, DType::kFloat64, {1});
  comms.share_from_head(total);
  comms.sum_over_replicas(total);
  result.num_original_tokens = data.num_original_tokens;
  result.num_tokenized_tokens = data.num_tokenized_tokens;
  result.avg_loss = result.total_loss / static_cast<double>(data.num_tokenized_tokens - 1);
  result.ppl = std::exp(std::min(20.0, result.avg_loss));
  result.token_ratio = static_cast<double>(data.num_tokenized_tokens - 1) /
                       static_cast<double>(data.num_original_tokens - 1);
  result.adjusted_ppl = std::exp(std::min(20.0, result.avg_loss * result.token_ratio));
  return result;
}

LambadaResult evaluate_lambada(const InferenceModel& model,
                               const std::vector<LambadaExample>& examples,
                               const IterationCallback& on_iteration) {
  const GptInference inference(model.options, *model.table, *model.params, model.comms,
                               model.device.get());
  const std::int64_t s = model.options.config.seq_length;
  const std::int64_t vp = model.options.config.padded_vocab_size;
  const std::int64_t b = model.options.micro_batch_size;
  LambadaResult result;
  result.total = static_cast<std::int64_t>(examples.size());
  // Replica r scores examples r, r + D, ...
  const InferenceComms& comms = model.comms;
  const auto replicas = static_cast<std::size_t>(comms.dp_size);
  std::int64_t local = 0;  // examples this replica has taken so far
  // One cache for every example (no allocation per example on a device).
  KvCache cache = inference.make_cache(1, s);
  for (std::size_t e = static_cast<std::size_t>(comms.dp_rank); e < examples.size();
       e += replicas, ++local) {
    if (on_iteration && local % b == 0) on_iteration(local / b);
    const LambadaExample& example = examples[e];
    std::vector<std::int64_t> sequence = example.context;
    sequence.insert(sequence.end(), example.target.begin(), example.target.end());
    const std::int64_t length = static_cast<std::int64_t>(sequence.size());
    if (length > s + 1) {
      base::fail("LAMBADA example ", e + 1, ": ", length,
                 " tokens (context and target) do not fit --seq-length ", s, " + 1");
    }
    // Labels are the tokens after each input; the target's labels are the last ones. With an
    // empty context the first target token has no input before it and is not scored (upstream).
    const std::int64_t inputs = length - 1;
    const std::int64_t scored =
        std::min<std::int64_t>(static_cast<std::int64_t>(example.target.size()), inputs);
    bool correct = true;
    if (scored > 0) {
      cache.clear();
      const std::vector<float> logits = inference.forward(
          cache, std::span(sequence.data(), static_cast<std::size_t>(inputs)), inputs, scored);
      for (std::int64_t k = 0; k < scored && inference.has_logits(); ++k) {
        const std::span<const float> row(logits.data() + k * vp, static_cast<std::size_t>(vp));
        const std::int64_t label = sequence[static_cast<std::size_t>(length - scored + k)];
        correct = correct && argmax(row) == label;
      }
    }
    if (inference.has_logits()) result.correct += correct ? 1 : 0;
  }
  // Each replica's last stage scored its examples; every rank reports the count over replicas.
  const Tensor correct(&result.correct, DType::kInt64, {1});
  comms.share_from_head(correct);
  comms.sum_over_replicas(correct);
  result.accuracy = static_cast<double>(result.correct) / static_cast<double>(result.total);
  return result;
}

namespace {

std::vector<std::string> framed(const std::string& line) {
  const std::string dashes(line.size() + 1, '-');
  return {dashes, line, dashes};
}

}  // namespace

std::vector<std::string> wikitext_result_lines(const WikitextResult& r) {
  return framed(" validation results on WIKITEXT103 | avg loss: " + format_e4(r.avg_loss) +
                " | ppl: " + format_e4(r.ppl) + " | adjusted ppl: " + format_e4(r.adjusted_ppl) +
                " | token ratio: " + base::python_float_repr(r.token_ratio) + " |");
}

std::vector<std::string> lambada_result_lines(const LambadaResult& r) {
  return framed(" validation results on LAMBADA | number correct: " +
                format_e4(static_cast<double>(r.correct)) +
                " | total examples: " + format_e4(static_cast<double>(r.total)) +
                " | avg accuracy: " + format_e4(r.accuracy));
}

std::string wikitext_result_json(const WikitextResult& r, const std::string& valid_data,
                                 const std::string& checkpoint) {
  return "{\"task\": \"WIKITEXT103\", \"valid_data\": " + json_string(valid_data) +
         ", \"checkpoint\": " + json_string(checkpoint) +
         ", \"avg_loss\": " + json_number(r.avg_loss) + ", \"ppl\": " + json_number(r.ppl) +
         ", \"adjusted_ppl\": " + json_number(r.adjusted_ppl) +
         ", \"token_ratio\": " + json_number(r.token_ratio) +
         ", \"total_loss\": " + json_number(r.total_loss) +
         ", \"num_original_tokens\": " + std::to_string(r.num_original_tokens) +
         ", \"num_tokenized_tokens\": " + std::to_string(r.num_tokenized_tokens) +
         ", \"windows\": " + std::to_string(r.windows) + "}";
}

std::string lambada_result_json(const LambadaResult& r, const std::string& valid_data,
                                const std::string& checkpoint, bool strict) {
  return "{\"task\": \"LAMBADA\", \"valid_data\": " + json_string(valid_data) +
         ", \"checkpoint\": " + json_string(checkpoint) +
         ", \"strict\": " + (strict ? "true" : "false") +
         ", \"correct\": " + std::to_string(r.correct) + ", \"total\": " + std::to_string(r.total) +
         ", \"accuracy\": " + json_number(r.accuracy) + "}";
}

}  // namespace mds::tasks
