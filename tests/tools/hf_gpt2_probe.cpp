// The Hugging Face GPT-2 export and import (ckpt/hf_folder.h) driven from a test:
//   hf_gpt2_probe export DIR VOCAB_ROWS DTYPE TOKENS -- <generate's model flags with --load>
//     loads the checkpoint (any T×P, merged), writes the GPT-2 folder DIR, reads it back and,
//     when the export kept every padded row in fp32, checks the weights came back bit for bit;
//     then prints the model's logits for TOKENS (comma-separated ids) as one JSON list of rows.
//   hf_gpt2_probe import DIR PADDED_VOCAB TOKENS
//     reads the GPT-2 folder DIR into a model with PADDED_VOCAB rows and prints its logits.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "ckpt/hf_folder.h"
#include "tasks/gpt_inference.h"
#include "tasks/inference_model.h"
#include "tasks/task_args.h"
#include "text/tokenizer_factory.h"

namespace {

using namespace mds;

std::vector<std::int64_t> parse_tokens(const std::string& text) {
  std::vector<std::int64_t> tokens;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) tokens.push_back(std::stoll(item));
  return tokens;
}

tensor::DType parse_dtype(const std::string& name) {
  if (name == "fp32") return tensor::DType::kFloat32;
  if (name == "bf16") return tensor::DType::kBFloat16;
  if (name == "fp16") return tensor::DType::kFloat16;
  base::fail("dtype must be fp32, bf16 or fp16, got ", name);
}

void print_logits(const model::ModelOptions& options, const model::ParamTable& table,
                  const model::ParamBuffer& params, const std::vector<std::int64_t>& tokens) {
  const tasks::GptInference inference(options, table, params);
  const std::vector<float> logits = inference.full_logits(tokens);
  const std::size_t vocab = static_cast<std::size_t>(options.config.padded_vocab_size);
  std::printf("[");
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    std::printf(t > 0 ? ",\n[" : "[");
    for (std::size_t v = 0; v < vocab; ++v) {
      std::printf(v > 0 ? ",%.9g" : "%.9g", static_cast<double>(logits[t * vocab + v]));
    }
    std::printf("]");
  }
  std::printf("]\n");
}

int run_export(int argc, char** argv) {
  const std::string dir = argv[2];
  const std::int64_t vocab_rows = std::atoll(argv[3]);
  const tensor::DType dtype = parse_dtype(argv[4]);
  const std::vector<std::int64_t> tokens = parse_tokens(argv[5]);
  if (std::strcmp(argv[6], "--") != 0) base::fail("expected -- before the model flags");
  std::vector<char*> flags{argv[0]};
  for (int i = 7; i < argc; ++i) flags.push_back(argv[i]);
  tasks::GenerateArgs args =
      tasks::parse_generate_args(static_cast<int>(flags.size()), flags.data());
  tasks::validate_generate_args(args);
  const base::Log log("hf_gpt2_probe", stderr, stderr);
  const auto tokenizer = text::build_tokenizer(args.model.tokenizer);
  const tasks::InferenceModel model = tasks::load_inference_model(args.model, *tokenizer, log);
  ckpt::HfExportOptions options;
  options.vocab_rows = vocab_rows;
  options.dtype = dtype;
  options.vocab_file = args.model.tokenizer.vocab_file;
  options.merge_file = args.model.tokenizer.merge_file;
  ckpt::write_hf_gpt2_folder(dir, model.options, *model.params, options);
  const std::int64_t padded = model.options.config.padded_vocab_size;
  const ckpt::HfImportedModel back = ckpt::read_hf_gpt2_folder(dir, padded);
  if (vocab_rows == padded && dtype == tensor::DType::kFloat32) {
    const tensor::Tensor a = model.params->flat(), b = back.params->flat();
    if (a.bytes() != b.bytes() || std::memcmp(a.raw(), b.raw(), a.bytes()) != 0) {
      base::fail("import(export(x)) differs from x");
    }
    std::fprintf(stderr, "hf_gpt2_probe: import(export(x)) is bit-identical\n");
  }
  print_logits(model.options, *model.table, *model.params, tokens);
  return 0;
}

int run_import(char** argv) {
  const ckpt::HfImportedModel model = ckpt::read_hf_gpt2_folder(argv[2], std::atoll(argv[3]));
  print_logits(model.options, *model.table, *model.params, parse_tokens(argv[4]));
  return 0;
}

int run(int argc, char** argv) {
  if (argc >= 7 && std::strcmp(argv[1], "export") == 0) return run_export(argc, argv);
  if (argc == 5 && std::strcmp(argv[1], "import") == 0) return run_import(argv);
  base::fail(
      "usage: hf_gpt2_probe export DIR VOCAB_ROWS DTYPE TOKENS -- FLAGS | import DIR "
      "PADDED_VOCAB TOKENS");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hf_gpt2_probe: %s\n", e.what());
    return 1;
  }
}
