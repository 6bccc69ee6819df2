#include "tasks/task_args.h"

#include "base/error.h"
#include "config/flags.h"
#include "config/pretrain_flags.h"

namespace mds::tasks {
namespace {

using config::pretrain_flags::FlagGroup;

void finish_parse(config::FlagSet& flags, config::PretrainArgs& args, int argc, char** argv) {
  flags.parse(argc, argv);
  for (const CLI::Option* option : flags.app().get_options()) {
    if (option->count() == 0 || option->get_lnames().empty()) continue;
    args.given_flags.push_back("--" + option->get_lnames().front());
  }
  args.resolved_arguments = flags.resolved_arguments();
}

// Upstream requires --micro-batch-size; for inference it only sets how many windows or prompts
// run together, so mds defaults it to 1.
void make_micro_batch_optional(config::FlagSet& flags, config::PretrainArgs& args) {
  flags.app().get_option("--micro-batch-size")->required(false);
  args.micro_batch_size = 1;
}

}  // namespace

EvaluateArgs parse_evaluate_args(int argc, char** argv) {
  EvaluateArgs args;
  config::FlagSet flags(
      "evaluate",
      "Zero-shot evaluation of a GPT checkpoint on WikiText (loss, perplexity) or "
      "LAMBADA (accuracy), with upstream's flags (tasks/main.py).");
  config::add_pretrain_flags(flags, args.model);
  make_micro_batch_optional(flags, args.model);
  FlagGroup g(flags, "Zero-shot task");
  g.choice("--task", args.task, {"WIKITEXT103", "LAMBADA"},
           "WIKITEXT103 (loss, perplexity) or LAMBADA (last-word accuracy)")
      ->required();
  g.words("--valid-data", args.valid_data, 1, "the evaluation file (exactly one)");
  g.integer("--overlapping-eval", args.overlapping_eval,
            "WIKITEXT103: stride between windows; each window scores only its last this-many "
            "tokens");
  g.store_true("--strict-lambada", args.strict_lambada,
               "LAMBADA: the target is the whole last word, not its last BPE token");
  g.text("--results-file", args.results_file, "mds addition: also write the results as JSON here");
  for (const char* name :
       {"--epochs", "--keep-last", "--pretrained-checkpoint", "--train-data", "--qa-data-dev",
        "--qa-data-test", "--faiss-use-gpu", "--faiss-match", "--faiss-topk-retrievals"}) {
    const bool takes_value =
        std::string(name) != "--keep-last" && std::string(name) != "--faiss-use-gpu";
    g.refuse(name, "used only by the finetuning and retrieval tasks, which mds does not implement",
             takes_value);
  }
  finish_parse(flags, args.model, argc, argv);
  return args;
}

GenerateArgs parse_generate_args(int argc, char** argv) {
  GenerateArgs args;
  config::FlagSet flags("generate",
                        "Sample text from a GPT checkpoint: unconditionally (--num-samples, "
                        "--genfile) or continuing prompts (--sample-input-file), with upstream's "
                        "flags (tools/generate_samples_gpt.py).");
  config::add_pretrain_flags(flags, args.model);
  make_micro_batch_optional(flags, args.model);
  FlagGroup g(flags, "Text generation");
  g.real("--temperature", args.temperature, "divide the logits by this before sampling");
  g.store_true("--greedy", args.greedy, "take the most likely token instead of sampling");
  g.real("--top_p", args.top_p, "nucleus sampling threshold (0 = off)");
  g.integer("--top_k", args.top_k, "sample among the k most likely tokens (0 = off)");
  g.integer("--out-seq-length", args.out_seq_length, "most tokens to generate per sample");
  g.text("--sample-input-file", args.sample_input_file,
         "continue each line of this file ('-' reads standard input)");
  g.text("--sample-output-file", args.sample_output_file,
         "where --sample-input-file's results go (default: standard output)");
  g.integer("--num-samples", args.num_samples,
            "> 0: generate this many samples unconditionally into --genfile");
  g.text("--genfile", args.genfile,
         "JSON-lines output of unconditional samples ('-' or absent: standard output)");
  g.store_true("--recompute", args.recompute,
               "recompute the whole prefix every step instead of caching keys and values (same "
               "results, slower)");
  finish_parse(flags, args.model, argc, argv);
  return args;
}

void validate_inference_args(config::PretrainArgs& a) {
  const auto positive = [](const char* flag, std::int64_t value) {
    if (value <= 0) base::fail(flag, " must be > 0, got ", value);
  };
  config::validate_model_shape(a);
  positive("--micro-batch-size", a.micro_batch_size);
  if (a.glu_activation) {
    base::fail("--glu-activation ", *a.glu_activation, ": GLU MLPs are not implemented in mds yet");
  }
  if (a.fp16 && a.bf16) base::fail("--fp16 and --bf16 cannot both be given");
  a.params_dtype = a.fp16   ? config::ParamsDtype::kFloat16
                   : a.bf16 ? config::ParamsDtype::kBFloat16
                            : config::ParamsDtype::kFloat32;
  if (!a.load)
    base::fail("--load is required: the checkpoint folder (as pretrain --save wrote it)");
}

void validate_evaluate_args(EvaluateArgs& args) {
  validate_inference_args(args.model);
  if (!args.valid_data || args.valid_data->size() != 1) {
    base::fail("--valid-data takes exactly one file, got ",
               args.valid_data ? args.valid_data->size() : 0);
  }
}

void validate_generate_args(GenerateArgs& args) {
  validate_inference_args(args.model);
  if (args.num_samples < 0) base::fail("--num-samples must be >= 0, got ", args.num_samples);
  if (args.top_k < 0) base::fail("--top_k must be >= 0, got ", args.top_k);
  if (args.top_p < 0.0 || args.top_p > 1.0) {
    base::fail("--top_p must lie in [0, 1], got ", args.top_p);
  }
  if (!args.greedy && !(args.temperature > 0.0)) {
    base::fail("--temperature must be > 0 when sampling, got ", args.temperature);
  }
  if (args.out_seq_length <= 0) {
    base::fail("--out-seq-length must be > 0, got ", args.out_seq_length);
  }
  if (args.num_samples > 0 && args.sample_input_file) {
    base::fail("give --num-samples (unconditional) or --sample-input-file (prompts), not both");
  }
}

}  // namespace mds::tasks
