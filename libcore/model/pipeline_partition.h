// How DeepSpeed's PipelineModule cuts GPTModelPipe's spec list into pipeline stages
// (training.md §1.1, §3.1). Pure arithmetic: every rank computes the same `parts`.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/gpt_config.h"

namespace mds::model {

// deepspeed.runtime.utils.partition_uniform: num_parts + 1 boundaries; the last part absorbs
// the remainder (DeepSpeed <= 0.8.x), and parts may be empty when num_items < num_parts.
std::vector<std::int64_t> partition_uniform(std::int64_t num_items, std::int64_t num_parts);

// deepspeed.runtime.utils.partition_balanced: the partition whose heaviest part is minimal up to
// `eps`, found by bisection on the bottleneck and a greedy probe (training.md §3.1).
std::vector<std::int64_t> partition_balanced(const std::vector<double>& weights,
                                             std::int64_t num_parts, double eps = 1e-3);

// One entry of GPTModelPipe's spec list.
struct PipeSpec {
  // What DeepSpeed's `type:REGEX` matches against: the class of a LayerSpec / TiedLayerSpec,
  // or a function's __name__ ("<lambda>" for the transposes).
  std::string name;
  std::string tied_key;  // "embed" for the two TiedLayerSpecs, empty otherwise
  // Trainable parameters of the module as built on this TP rank (0 for functions). Both tied
  // specs count a whole EmbeddingPipe, as DeepSpeed builds each spec once to count it.
  std::int64_t trainable_params = 0;
};

// The L+7 specs (L+6 without fp16/bf16, which drops the trailing fp32 cast) of GPTModelPipe.
// Counts use the TP-local shapes of `config` and are as seen on the first pipeline stage,
// where the embedding's optional LayerNorm exists (upstream builds it only there).
std::vector<PipeSpec> pipeline_specs(const GptConfig& config, bool half_precision);

// `parts` (num_stages + 1 spec boundaries) for --pp-partition-method: "uniform", "parameters"
// or "type:REGEX" (case-insensitive regex search over PipeSpec::name), as
// PipelineModule._partition_layers. Stage k builds specs [parts[k], parts[k+1]).
std::vector<std::int64_t> pipeline_partition(const GptConfig& config, bool half_precision,
                                             std::int64_t num_stages, std::string_view method);

// Points config.stage_first_spec / stage_end_spec at stage `stage` of `parts`. Fails for an
// empty stage, which upstream cannot train either (each stage needs a transformer layer).
void set_stage_specs(GptConfig& config, const std::vector<std::int64_t>& parts, std::int64_t stage);

}  // namespace mds::model
