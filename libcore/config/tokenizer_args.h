#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace mds::config {

class FlagSet;

// Tokenizer flags shared by every program that reads or writes token ids (Megatron names).
struct TokenizerArgs {
  std::string tokenizer_type;  // GPT2BPETokenizer | SentencePieceTokenizer | PretrainedFromHF
  std::string vocab_file;
  std::string merge_file;
  std::string tokenizer_model;         // SentencePiece model file
  std::string tokenizer_name_or_path;  // PretrainedFromHF: tokenizer.json, its folder, or a name
  std::int64_t make_vocab_size_divisible_by = 128;
  std::optional<std::int64_t> pad_vocab_size_to;
};

// Registers --tokenizer-type, --vocab-file, --merge-file, --tokenizer-model,
// --tokenizer-name-or-path, --make-vocab-size-divisible-by, --pad-vocab-size-to (and the upstream
// flags this project rejects).
void add_tokenizer_flags(FlagSet& flags, TokenizerArgs& args, const std::string& default_type);

}  // namespace mds::config
