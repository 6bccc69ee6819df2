#include "ckpt/hf_import.h"

#include <filesystem>
#include <memory>

#include "base/error.h"
#include "ckpt/hf_folder.h"
#include "ckpt/json_value.h"
#include "ckpt/megatron_args.h"
#include "ckpt/reshard_target.h"
#include "ckpt/reshard_tp.h"
#include "config/deepspeed_config.h"
#include "text/tokenizer_factory.h"
#include "train/model_args.h"

namespace mds::ckpt {

namespace {

// A GPT-2 converted from another framework starts a run: no counters, no optimizer state.
constexpr const char* kImportTag = "global_step0";

// Sets an integer flag that was not given to the config's value; a given one must agree.
void take_or_check(config::PretrainArgs& args, const char* flag, std::int64_t& value,
                   std::int64_t from_config, const std::string& path, const char* key) {
  if (!args.was_given(flag)) {
    value = from_config;
    return;
  }
  if (value != from_config) {
    base::fail(flag, " ", value, " contradicts ", path, ", whose '", key, "' is ", from_config);
  }
}

void take_or_check(config::PretrainArgs& args, const char* flag, std::optional<std::int64_t>& value,
                   std::int64_t from_config, const std::string& path, const char* key) {
  std::int64_t given = value.value_or(from_config);
  take_or_check(args, flag, given, from_config, path, key);
  value = given;
}

bool is_tanh_gelu(const std::string& activation) {
  return activation != "gelu";
}

void check_gelu(const HfGpt2Config& hf, const std::string& path, const config::PretrainArgs& args) {
  const bool erf = !args.openai_gelu && !args.bias_gelu_fusion;
  if (erf == is_tanh_gelu(hf.activation_function)) {
    base::fail(path, ": activation_function '", hf.activation_function, "' is ",
               erf ? "a tanh GeLU, but --no-bias-gelu-fusion selects the erf one"
                   : "the erf GeLU; give --no-bias-gelu-fusion (here and to every later run)");
  }
}

// The tanh GeLUs agree up to rounding; say which flag gives the config's exact formula.
void note_gelu_rounding(const HfGpt2Config& hf, const config::PretrainArgs& args,
                        const base::Log& log) {
  const bool openai_form = hf.activation_function != "gelu_fast";
  const bool openai_flags = args.openai_gelu && !args.bias_gelu_fusion;
  if (!is_tanh_gelu(hf.activation_function) || openai_form == openai_flags) return;
  log.info(std::string(" note: activation_function '") + hf.activation_function + "' is " +
           (openai_form ? "--no-bias-gelu-fusion --openai-gelu"
                        : "the fused tanh GeLU (without --no-bias-gelu-fusion)") +
           "; the GeLU of these flags rounds differently (give the same flag to every later run "
           "for the exact function)");
}

tensor::DType dtype_of_config(const std::string& torch_dtype, const std::string& path) {
  if (torch_dtype == "float32") return tensor::DType::kFloat32;
  if (torch_dtype == "bfloat16") return tensor::DType::kBFloat16;
  if (torch_dtype == "float16") return tensor::DType::kFloat16;
  base::fail(path, ": torch_dtype '", torch_dtype, "' is not float32, bfloat16 or float16");
}

OptimizerLayout layout_for(tensor::DType dtype, int zero_stage) {
  switch (dtype) {
    case tensor::DType::kBFloat16:
      return OptimizerLayout::kBf16;
    case tensor::DType::kFloat16:
      return zero_stage >= 1 ? OptimizerLayout::kFp16Zero1 : OptimizerLayout::kFp16;
    default:
      return zero_stage >= 1 ? OptimizerLayout::kFp32Zero : OptimizerLayout::kFp32;
  }
}

void check_flag_combination(const MergeMpArgs& args) {
  if (args.model.load)
    base::fail("--from-hf and --load cannot both be given: one source at a time");
  if (args.to_hf) base::fail("--from-hf and --to-hf cannot both be given");
  if (!args.model.save) base::fail("--from-hf needs --save: the folder to write the checkpoint");
}

// GPT-2 folders carry their tokenizer: use it when no tokenizer file was named.
void default_tokenizer_files(const std::string& dir, config::TokenizerArgs& tokenizer,
                             const base::Log& log) {
  if (tokenizer.tokenizer_type != "GPT2BPETokenizer" || !tokenizer.vocab_file.empty()) return;
  const std::string vocab = dir + "/vocab.json";
  const std::string merges = dir + "/merges.txt";
  std::error_code error;
  if (!std::filesystem::exists(vocab, error) || !std::filesystem::exists(merges, error)) {
    base::fail("--vocab-file and --merge-file are required: ", dir,
               " has no vocab.json and merges.txt");
  }
  tokenizer.vocab_file = vocab;
  tokenizer.merge_file = merges;
  log.info(" tokenizer: " + vocab + " and " + merges);
}

// The output's dtype and optimizer layout: --bf16/--fp16 (and the DeepSpeed config's ZeRO stage)
// when given, else what config.json says the tensors are.
struct OutputKind {
  tensor::DType dtype = tensor::DType::kFloat32;
  OptimizerLayout layout = OptimizerLayout::kFp32;
  io::Value ds_config = io::Value::dict();
};

OutputKind output_kind(config::PretrainArgs& args, const HfGpt2Config& hf,
                       const std::string& path) {
  OutputKind kind;
  int zero_stage = 0;
  if (args.deepspeed_config) {
    config::DeepSpeedConfig ds = config::load_deepspeed_config(*args.deepspeed_config);
    config::check_precision_matches(ds, args.fp16, args.bf16);
    zero_stage = ds.zero.stage;
    kind.ds_config = json_to_value(config::parse_json(ds.json_text, ds.source));
    args.deepspeed_configuration = std::move(ds);
  }
  kind.dtype = args.bf16   ? tensor::DType::kBFloat16
               : args.fp16 ? tensor::DType::kFloat16
                           : dtype_of_config(hf.torch_dtype, path);
  kind.layout = layout_for(kind.dtype, zero_stage);
  return kind;
}

}  // namespace

void apply_hf_config_to_flags(const HfGpt2Config& hf, const std::string& path,
                              config::PretrainArgs& args) {
  take_or_check(args, "--num-layers", args.num_layers, hf.n_layer, path, "n_layer");
  take_or_check(args, "--hidden-size", args.hidden_size, hf.n_embd, path, "n_embd");
  take_or_check(args, "--num-attention-heads", args.num_attention_heads, hf.n_head, path, "n_head");
  take_or_check(args, "--ffn-hidden-size", args.ffn_hidden_size,
                hf.n_inner > 0 ? hf.n_inner : 4 * hf.n_embd, path, "n_inner");
  take_or_check(args, "--max-position-embeddings", args.max_position_embeddings, hf.n_positions,
                path, "n_positions");
  if (!args.was_given("--seq-length") && !args.was_given("--encoder-seq-length")) {
    args.seq_length = hf.n_positions;
  }
  if (!args.was_given("--layernorm-epsilon")) {
    args.layernorm_epsilon = hf.layer_norm_epsilon;
  } else if (args.layernorm_epsilon != hf.layer_norm_epsilon) {
    base::fail("--layernorm-epsilon ", args.layernorm_epsilon, " contradicts ", path,
               ", whose 'layer_norm_epsilon' is ", hf.layer_norm_epsilon);
  }
  check_gelu(hf, path, args);
}

void import_hf_gpt2(MergeMpArgs& args, const base::Log& log) {
  check_flag_combination(args);
  const std::string dir = *args.from_hf;
  const std::string config_path = dir + "/config.json";
  const HfGpt2Config hf = read_hf_gpt2_config(config_path);
  config::PretrainArgs& model_args = args.model;
  apply_hf_config_to_flags(hf, config_path, model_args);
  note_gelu_rounding(hf, model_args, log);
  validate_merge_mp_args(args);
  default_tokenizer_files(dir, model_args.tokenizer, log);
  const OutputKind kind = output_kind(model_args, hf, config_path);

  const std::int64_t tokens = text::build_tokenizer(model_args.tokenizer)->vocab_size();
  if (tokens > hf.vocab_size) {
    base::fail("the tokenizer has ", tokens, " tokens but ", config_path, " has only ",
               hf.vocab_size, " embedding rows (vocab_size)");
  }
  TargetGrid grid;
  grid.tp_size = args.target_tensor_model_parallel_size;
  grid.pp_size = args.target_pipeline_model_parallel_size;
  grid.partition_method = model_args.pp_partition_method;
  const std::int64_t padded = text::padded_vocab_size(tokens, model_args.tokenizer, grid.tp_size);
  const model::ModelOptions options = train::model_options_from_args(model_args, padded);
  plan_target_grid(options.config, kind.dtype != tensor::DType::kFloat32, grid);

  log.info("merge-mp-partitions: " + dir + " (GPT-2, " + std::to_string(hf.n_layer) +
           " layers, hidden " + std::to_string(hf.n_embd) + ", " + std::to_string(hf.vocab_size) +
           " vocabulary rows, " + hf.torch_dtype + ") -> " + *model_args.save +
           " (T = " + std::to_string(grid.tp_size) + " × P = " + std::to_string(grid.pp_size) +
           ", " + std::string(tensor::dtype_name(kind.dtype)) + ", " + std::to_string(padded) +
           " vocabulary rows)");
  const HfImportedModel imported = read_hf_gpt2_folder(dir, std::max(padded, hf.vocab_size));
  const model::ParamBuffer* full = imported.params.get();
  std::unique_ptr<model::ParamTable> resized_table;
  std::unique_ptr<model::ParamBuffer> resized;
  if (padded < hf.vocab_size) {
    log.info(" word embedding: keeping the first " + std::to_string(padded) + " of " +
             std::to_string(hf.vocab_size) + " rows (the tokenizer has " + std::to_string(tokens) +
             " tokens)");
    resized_table = std::make_unique<model::ParamTable>(model::ParamTable::build(options.config));
    resized = std::make_unique<model::ParamBuffer>(*resized_table, tensor::DType::kFloat32);
    copy_resizing_vocabulary(*imported.params, *resized);
    full = resized.get();
  }

  SourceCheckpoint source;
  source.folder = dir;
  source.output_tag = kImportTag;
  source.dtype = kind.dtype;
  source.layout = kind.layout;
  source.padded_vocab_size = padded;
  source.original_vocab_size = tokens;
  MegatronRunValues run;
  run.padded_vocab_size = padded;
  source.args = megatron_args_namespace(model_args, run);
  MergedSource merged;
  merged.ds_config = kind.ds_config;
  write_target_checkpoint(*model_args.save, *full, options.config, grid, source, merged, log);
  log.info(" wrote " + *model_args.save + "/" + kImportTag + " and " + *model_args.save +
           "/latest");
}

}  // namespace mds::ckpt
