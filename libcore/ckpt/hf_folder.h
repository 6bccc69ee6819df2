// A Hugging Face GPT-2 model folder as `GPT2LMHeadModel.from_pretrained` reads it: config.json,
// model.safetensors and the tokenizer files (checkpoints.md §6), written from or read into the
// whole model's fp32 weights.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/model_options.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "tensor/dtype.h"

namespace mds::ckpt {

struct HfExportOptions {
  // Rows of the word embedding written (GPT-2's vocab_size): the padded vocabulary keeps the
  // model exactly as trained (its padded logits take part in the softmax); the tokenizer's size
  // gives the familiar 50257 at the price of those extra terms.
  std::int64_t vocab_rows = 0;
  tensor::DType dtype = tensor::DType::kFloat32;  // of the stored tensors (torch_dtype)
  std::string vocab_file;                         // GPT-2 vocab.json and merges.txt, copied
  std::string merge_file;
};

// Writes the folder `dir` atomically (a hidden temporary renamed into place). The model must be
// whole (T = P = 1) and expressible as GPT-2 (check_gpt2_compatible).
void write_hf_gpt2_folder(const std::string& dir, const model::ModelOptions& options,
                          const model::ParamBuffer& whole, const HfExportOptions& export_options);

struct HfImportedModel {
  model::ModelOptions options;  // from config.json; seq_length = n_positions, dropout as saved
  std::int64_t vocab_size = 0;  // config.json's vocab_size: the rows stored
  std::unique_ptr<model::ParamTable> table;
  std::unique_ptr<model::ParamBuffer> params;  // fp32
};

// Reads `dir`/config.json and `dir`/model.safetensors into a whole model whose vocabulary is
// padded to `padded_vocab` rows (≥ vocab_size; the extra rows are zero). Errors name the file.
HfImportedModel read_hf_gpt2_folder(const std::string& dir, std::int64_t padded_vocab);

}  // namespace mds::ckpt
