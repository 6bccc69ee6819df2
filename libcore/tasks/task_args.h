// Command lines of `evaluate` (upstream tasks/main.py) and `generate`
// (tools/generate_samples_gpt.py): the whole Megatron flag registry that pretrain has, plus each
// program's own flags under upstream's names, and the model-shape checks inference needs (the
// training-only rules of validate_pretrain_args, such as a required --train-iters, do not apply).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/pretrain_args.h"

namespace mds::tasks {

struct EvaluateArgs {
  config::PretrainArgs model;  // model, tokenizer, --load, --micro-batch-size, ...
  std::string task;            // WIKITEXT103 | LAMBADA
  std::optional<std::vector<std::string>> valid_data;
  std::optional<std::int64_t> overlapping_eval = 32;
  bool strict_lambada = false;
  std::optional<std::string> results_file;  // mds addition: JSON summary
};

struct GenerateArgs {
  config::PretrainArgs model;
  double temperature = 1.0;
  bool greedy = false;
  double top_p = 0.0;
  std::int64_t top_k = 0;
  std::int64_t out_seq_length = 1024;
  std::optional<std::string> sample_input_file;   // '-' reads stdin
  std::optional<std::string> sample_output_file;  // default stdout
  std::int64_t num_samples = 0;
  std::optional<std::string> genfile;
  bool recompute = false;
};

// Parse like parse_pretrain_args: --help exits 0, a bad command line prints one
// "<program>: error: ..." line and exits 2. Nothing is validated yet.
EvaluateArgs parse_evaluate_args(int argc, char** argv);
GenerateArgs parse_generate_args(int argc, char** argv);

// The model-shape and process rules of arguments.py that matter for inference (positive sizes,
// head size, --seq-length, --max-position-embeddings, absolute positions, --load given), filling
// the derived fields (ffn_hidden_size, kv_channels, seq_length, params_dtype). The TP and PP sizes
// are checked against the ranks and the checkpoint by tasks::choose_inference_grid.
void validate_inference_args(config::PretrainArgs& args);
void validate_evaluate_args(EvaluateArgs& args);
void validate_generate_args(GenerateArgs& args);

}  // namespace mds::tasks
