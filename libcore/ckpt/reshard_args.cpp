#include "ckpt/reshard_args.h"

#include <algorithm>
#include <filesystem>
#include <string_view>

#include "base/error.h"
#include "config/flags.h"
#include "config/pretrain_flags.h"

namespace mds::ckpt {

MergeMpArgs parse_merge_mp_args(int argc, char** argv) {
  MergeMpArgs args;
  config::FlagSet flags(
      "merge-mp-partitions",
      "Re-partition the weights of a DeepSpeed pipeline checkpoint (as pretrain --save writes "
      "it) for another tensor- and pipeline-parallel grid: merge or split TP, re-cut PP; the "
      "result loads in pretrain --finetune, evaluate and generate (upstream "
      "tools/merge_mp_partitions.py). The model flags describe the source model; its TP and PP "
      "sizes are read from the checkpoint.");
  config::add_pretrain_flags(flags, args.model);
  // Upstream requires --micro-batch-size; nothing here runs a batch.
  flags.app().get_option("--micro-batch-size")->required(false);
  args.model.micro_batch_size = 1;
  config::pretrain_flags::FlagGroup g(flags, "Checkpoint re-partitioning");
  g.choice("--model-type", args.model_type, {"BERT", "GPT", "RACE", "MNLI", "QQP"},
           "the model the checkpoint holds (only GPT is supported)");
  g.integer("--target-tensor-model-parallel-size", args.target_tensor_model_parallel_size,
            "tensor-parallel size of the written checkpoint (merge when smaller than the source's, "
            "split when larger)");
  g.integer("--target-pipeline-model-parallel-size", args.target_pipeline_model_parallel_size,
            "pipeline stages of the written checkpoint, cut by --pp-partition-method as pretrain "
            "cuts them");
  g.text("--to-hf", args.to_hf,
         "write the merged model as a Hugging Face GPT-2 folder (config.json, model.safetensors, "
         "tokenizer files) into this directory instead of a checkpoint (mds addition)");
  g.text("--from-hf", args.from_hf,
         "read a Hugging Face GPT-2 folder (config.json, model.safetensors) instead of --load and "
         "write it as the checkpoint of the target grid into --save; model flags not given are "
         "taken from its config.json (mds addition)");
  // A GPT-2 folder's config.json gives the model's shape.
  const bool from_hf = std::any_of(argv + 1, argv + argc, [](const char* arg) {
    return std::string_view(arg).starts_with("--from-hf");
  });
  if (from_hf) {
    for (const char* flag : {"--num-layers", "--hidden-size", "--num-attention-heads"}) {
      flags.app().get_option(flag)->required(false);
    }
  }
  flags.parse(argc, argv);
  for (const CLI::Option* option : flags.app().get_options()) {
    if (option->count() == 0 || option->get_lnames().empty()) continue;
    args.model.given_flags.push_back("--" + option->get_lnames().front());
  }
  args.model.resolved_arguments = flags.resolved_arguments();
  return args;
}

void validate_merge_mp_args(MergeMpArgs& args) {
  config::PretrainArgs& a = args.model;
  if (args.model_type != "GPT") {
    base::fail("--model-type ", args.model_type, ": only GPT checkpoints are supported");
  }
  config::validate_model_shape(a);
  if (a.glu_activation) {
    base::fail("--glu-activation ", *a.glu_activation, ": GLU MLPs are not implemented in mds yet");
  }
  if (a.fp16 && a.bf16) base::fail("--fp16 and --bf16 cannot both be given");
  const std::optional<std::string>& source = args.from_hf ? args.from_hf : a.load;
  if (!source) base::fail("--load is required: the checkpoint folder to re-partition");
  if (args.to_hf) {
    if (a.save) base::fail("--to-hf and --save cannot both be given: one output at a time");
    if (args.target_tensor_model_parallel_size != 1 ||
        args.target_pipeline_model_parallel_size != 1) {
      base::fail("--to-hf writes the whole model: the target sizes must be 1");
    }
    a.save = *args.to_hf;
  }
  if (!a.save) base::fail("--save is required: the folder to write the re-partitioned checkpoint");
  const auto canonical = [](const std::string& path) {
    std::error_code error;
    const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, error);
    return error ? std::filesystem::path(path) : resolved;
  };
  if (canonical(*source) == canonical(*a.save)) {
    base::fail("--save ", *a.save, " is the ", args.from_hf ? "--from-hf" : "--load",
               " folder; write the result elsewhere");
  }
  if (args.target_tensor_model_parallel_size < 1) {
    base::fail("--target-tensor-model-parallel-size must be >= 1, got ",
               args.target_tensor_model_parallel_size);
  }
  if (args.target_pipeline_model_parallel_size < 1) {
    base::fail("--target-pipeline-model-parallel-size must be >= 1, got ",
               args.target_pipeline_model_parallel_size);
  }
}

}  // namespace mds::ckpt
