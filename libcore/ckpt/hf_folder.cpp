#include "ckpt/hf_folder.h"

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "ckpt/checkpoint_folder.h"
#include "ckpt/hf_gpt2.h"
#include "io/safetensors.h"

namespace mds::ckpt {

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) base::fail(path, ": cannot be written");
}

void copy_into(const std::string& source, const std::string& target) {
  std::error_code error;
  std::filesystem::copy_file(source, target, error);
  if (error) base::fail(source, ": cannot be copied (", error.message(), ")");
}

std::string tokenizer_config_json(std::int64_t max_length) {
  return "{\n  \"add_prefix_space\": false,\n  \"bos_token\": \"<|endoftext|>\",\n"
         "  \"eos_token\": \"<|endoftext|>\",\n  \"model_max_length\": " +
         std::to_string(max_length) +
         ",\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n  \"unk_token\": \"<|endoftext|>\"\n}\n";
}

ops::GeluKind gelu_of(const std::string& activation, const std::string& path) {
  if (activation == "gelu_fast") return ops::GeluKind::kTanhFused;
  if (activation == "gelu_new" || activation == "gelu_pytorch_tanh") {
    return ops::GeluKind::kTanhOpenAI;
  }
  if (activation == "gelu") return ops::GeluKind::kErf;
  base::fail(path, ": activation_function '", activation,
             "' is not one of GPT-2's GeLUs (gelu_new, gelu_fast, gelu_pytorch_tanh, gelu)");
}

}  // namespace

void write_hf_gpt2_folder(const std::string& dir, const model::ModelOptions& options,
                          const model::ParamBuffer& whole, const HfExportOptions& export_options) {
  const HfGpt2Config config =
      hf_gpt2_config(options, export_options.vocab_rows, export_options.dtype);
  const HfTensors tensors =
      to_hf_gpt2(options.config, whole, export_options.vocab_rows, export_options.dtype);
  StagedFolder folder(dir);
  write_text(folder.file("config.json"), hf_gpt2_config_json(config));
  io::write_safetensors(folder.file("model.safetensors"), tensors.tensors, {{"format", "pt"}});
  if (!export_options.vocab_file.empty()) {
    copy_into(export_options.vocab_file, folder.file("vocab.json"));
    copy_into(export_options.merge_file, folder.file("merges.txt"));
    write_text(folder.file("tokenizer_config.json"), tokenizer_config_json(config.n_positions));
  }
  folder.commit();
}

HfImportedModel read_hf_gpt2_folder(const std::string& dir, std::int64_t padded_vocab) {
  const std::string config_path = dir + "/config.json";
  const HfGpt2Config hf = read_hf_gpt2_config(config_path);
  if (padded_vocab < hf.vocab_size) {
    base::fail(config_path, ": vocab_size ", hf.vocab_size, " is larger than the padded ",
               padded_vocab);
  }
  HfImportedModel m;
  m.vocab_size = hf.vocab_size;
  model::GptConfig& c = m.options.config;
  c.num_layers = hf.n_layer;
  c.hidden_size = hf.n_embd;
  c.num_attention_heads = hf.n_head;
  c.ffn_hidden_size = hf.n_inner;
  c.seq_length = hf.n_positions;
  c.max_position_embeddings = hf.n_positions;
  c.padded_vocab_size = padded_vocab;
  c.init_method_std = hf.initializer_range;
  m.options.layernorm_epsilon = static_cast<float>(hf.layer_norm_epsilon);
  m.options.gelu = gelu_of(hf.activation_function, config_path);
  m.options.hidden_dropout = static_cast<float>(hf.resid_pdrop);
  m.options.attention_dropout = static_cast<float>(hf.attn_pdrop);
  model::validate(c);
  m.table = std::make_unique<model::ParamTable>(model::ParamTable::build(c));
  m.params = std::make_unique<model::ParamBuffer>(*m.table, tensor::DType::kFloat32);
  from_hf_gpt2(HfWeights::open(dir), c, *m.params);
  return m;
}

}  // namespace mds::ckpt
