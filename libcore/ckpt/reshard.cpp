#include "ckpt/reshard.h"

#include <memory>

#include "base/error.h"
#include "ckpt/hf_folder.h"
#include "ckpt/hf_import.h"
#include "ckpt/megatron_args.h"
#include "ckpt/reshard_source.h"
#include "ckpt/reshard_target.h"
#include "ckpt/reshard_tp.h"
#include "text/tokenizer_factory.h"
#include "train/model_args.h"

namespace mds::ckpt {

namespace {

tensor::DType requested_dtype(const config::PretrainArgs& args) {
  if (args.bf16) return tensor::DType::kBFloat16;
  return args.fp16 ? tensor::DType::kFloat16 : tensor::DType::kFloat32;
}

// The grid flags describe the source; when given they must agree with what it was saved at.
void check_source_flags(const config::PretrainArgs& args, const SourceCheckpoint& source) {
  const auto check = [&](const char* flag, std::int64_t given, std::int64_t saved) {
    if (args.was_given(flag) && given != saved) {
      base::fail(flag, " ", given, " contradicts the checkpoint ", source.folder,
                 ", which was saved at ", saved, " (the source grid is read from it)");
    }
  };
  check("--tensor-model-parallel-size", args.tensor_model_parallel_size, source.tp_size);
  check("--pipeline-model-parallel-size", args.pipeline_model_parallel_size, source.pp_size);
  if ((args.bf16 || args.fp16) && requested_dtype(args) != source.dtype) {
    base::fail(args.bf16 ? "--bf16" : "--fp16", " contradicts the checkpoint ", source.folder,
               ", whose weights are ", tensor::dtype_name(source.dtype),
               " (the output keeps the checkpoint's dtype)");
  }
}

// Megatron's padding of the original vocabulary for `tp_size` under the command line's
// --make-vocab-size-divisible-by / --pad-vocab-size-to.
std::int64_t padded_for(const config::PretrainArgs& args, const SourceCheckpoint& source,
                        std::int64_t tp_size) {
  return text::padded_vocab_size(source.original_vocab_size, args.tokenizer, tp_size);
}

void check_vocabulary(const config::PretrainArgs& args, const SourceCheckpoint& source) {
  if (!args.tokenizer.vocab_file.empty() || !args.tokenizer.tokenizer_model.empty() ||
      !args.tokenizer.tokenizer_name_or_path.empty()) {
    const std::int64_t tokens = text::build_tokenizer(args.tokenizer)->vocab_size();
    if (tokens != source.original_vocab_size) {
      base::fail("the tokenizer has ", tokens, " tokens but the checkpoint ", source.folder,
                 " was trained with ", source.original_vocab_size,
                 " (checkpoint_info.original_vocab_size)");
    }
  }
  const std::int64_t padded = padded_for(args, source, source.tp_size);
  if (padded != source.padded_vocab_size) {
    base::fail("the checkpoint ", source.folder, " pads its ", source.original_vocab_size,
               " tokens to ", source.padded_vocab_size, " rows at T = ", source.tp_size,
               ", but --make-vocab-size-divisible-by ", args.tokenizer.make_vocab_size_divisible_by,
               args.tokenizer.pad_vocab_size_to
                   ? " --pad-vocab-size-to " + std::to_string(*args.tokenizer.pad_vocab_size_to)
                   : std::string(),
               " gives ", padded, "; give the flags it was trained with");
  }
}

std::string grid_text(std::int64_t tp, std::int64_t pp) {
  return "T = " + std::to_string(tp) + " × P = " + std::to_string(pp);
}

}  // namespace

void merge_mp_partitions(MergeMpArgs& args, const base::Log& log) {
  if (args.from_hf) {
    import_hf_gpt2(args, log);
    return;
  }
  validate_merge_mp_args(args);
  config::PretrainArgs& model_args = args.model;
  const SourceCheckpoint source = inspect_source_checkpoint(*model_args.load);
  check_source_flags(model_args, source);
  check_vocabulary(model_args, source);
  {
    config::PretrainArgs as_saved = model_args;
    as_saved.tensor_model_parallel_size = source.tp_size;
    as_saved.pipeline_model_parallel_size = source.pp_size;
    check_checkpoint_args(io::ValueRef(source.args, "args"), as_saved, source.padded_vocab_size,
                          source.folder);
  }

  TargetGrid grid;
  grid.tp_size = args.target_tensor_model_parallel_size;
  grid.pp_size = args.target_pipeline_model_parallel_size;
  grid.partition_method = model_args.pp_partition_method;
  const std::int64_t target_padded = padded_for(model_args, source, grid.tp_size);
  model::GptConfig source_config =
      train::model_options_from_args(model_args, source.padded_vocab_size).config;
  model::GptConfig target_config = source_config;
  target_config.padded_vocab_size = target_padded;
  plan_target_grid(target_config, source.dtype != tensor::DType::kFloat32, grid);

  check_source_files(source, source_config);
  log.info("merge-mp-partitions: " + source.folder + " (" +
           grid_text(source.tp_size, source.pp_size) + ", " +
           std::string(tensor::dtype_name(source.dtype)) + ", " +
           std::to_string(source.padded_vocab_size) + " vocabulary rows) -> " + *model_args.save +
           " (" + grid_text(grid.tp_size, grid.pp_size) + ", " + std::to_string(target_padded) +
           " vocabulary rows)");
  const MergedSource merged = load_merged_source(source, source_config, log);
  const model::ParamBuffer* full = merged.weights.get();
  std::unique_ptr<model::ParamTable> resized_table;
  std::unique_ptr<model::ParamBuffer> resized;
  if (target_padded != source.padded_vocab_size) {
    log.info(std::string(" word embedding: ") +
             (target_padded < source.padded_vocab_size ? "cutting" : "zero-padding") + " " +
             std::to_string(source.padded_vocab_size) + " padded rows to " +
             std::to_string(target_padded) + " (the first " +
             std::to_string(source.original_vocab_size) + " are the vocabulary)");
    resized_table = std::make_unique<model::ParamTable>(model::ParamTable::build(target_config));
    resized = std::make_unique<model::ParamBuffer>(*resized_table, tensor::DType::kFloat32);
    copy_resizing_vocabulary(*merged.weights, *resized);
    full = resized.get();
  }
  if (args.to_hf) {
    HfExportOptions hf;
    hf.vocab_rows = target_padded;  // every padded row: the model exactly as trained
    hf.dtype = source.dtype;
    hf.vocab_file = model_args.tokenizer.vocab_file;
    hf.merge_file = model_args.tokenizer.merge_file;
    write_hf_gpt2_folder(*args.to_hf, train::model_options_from_args(model_args, target_padded),
                         *full, hf);
    log.info(" wrote the Hugging Face GPT-2 folder " + *args.to_hf);
    return;
  }
  write_target_checkpoint(*model_args.save, *full, target_config, grid, source, merged, log);
  log.info(" wrote " + *model_args.save + "/" + source.output_tag + " and " + *model_args.save +
           "/latest");
}

}  // namespace mds::ckpt
