// Hugging Face transformers GPT-2 (checkpoints.md §6.1–§6.3): the mapping between the whole
// model's parameters (T = P = 1, laid out by a ParamTable) and GPT2LMHeadModel's tensors, its
// config.json, and the export/import of a whole folder (config.json, model.safetensors,
// tokenizer files).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/hf_weights.h"
#include "io/safetensors.h"
#include "model/model_options.h"
#include "model/param_buffer.h"
#include "tensor/buffer.h"

namespace mds::ckpt {

// What a GPT-2 config.json says about the model, with the upstream argument it maps to.
struct HfGpt2Config {
  std::int64_t vocab_size = 0;   // rows of wte (the padded vocabulary when exported by mds)
  std::int64_t n_positions = 0;  // --max-position-embeddings
  std::int64_t n_embd = 0;       // --hidden-size
  std::int64_t n_layer = 0;      // --num-layers
  std::int64_t n_head = 0;       // --num-attention-heads
  std::int64_t n_inner = 0;      // --ffn-hidden-size; 0 (null) means 4·n_embd
  double layer_norm_epsilon = 1e-5;
  double initializer_range = 0.02;
  double resid_pdrop = 0.1, embd_pdrop = 0.1, attn_pdrop = 0.1;
  std::string activation_function = "gelu_new";
  std::string torch_dtype = "float32";
};

// Fails naming what GPT-2 cannot express (rotary/ALiBi positions, embedding LayerNorm, GLU,
// post-LayerNorm residuals, a TP shard or a pipeline stage).
void check_gpt2_compatible(const model::ModelOptions& options);

HfGpt2Config hf_gpt2_config(const model::ModelOptions& options, std::int64_t vocab_rows,
                            tensor::DType dtype);
std::string hf_gpt2_config_json(const HfGpt2Config& config);
// Reads and checks a GPT-2 config.json (model_type "gpt2"); errors name the file and key.
HfGpt2Config read_hf_gpt2_config(const std::string& path);

// GPT2LMHeadModel's tensors ("transformer.wte.weight", ...; the tied lm_head is not stored) in
// `dtype` (fp32, bf16 or fp16, rounded to nearest even), from fp32 whole-model weights. The first
// `vocab_rows` rows of the word embedding are kept (at most the padded vocabulary).
struct HfTensors {
  std::vector<io::NamedTensor> tensors;
  std::vector<tensor::Buffer> storage;
};
HfTensors to_hf_gpt2(const model::GptConfig& config, const model::ParamBuffer& whole,
                     std::int64_t vocab_rows, tensor::DType dtype);

// The inverse: fills the fp32 whole-model buffer of `config` (whose shapes must be the file's, with
// at least as many vocabulary rows; extra rows are zeroed) from a GPT-2's weights in any of
// transformers' layouts (ckpt/hf_weights.h), with or without the "transformer." prefix, in any
// floating-point dtype. Fails naming a missing or misshapen tensor.
void from_hf_gpt2(const HfWeights& weights, const model::GptConfig& config,
                  const model::ParamBuffer& whole);

}  // namespace mds::ckpt
