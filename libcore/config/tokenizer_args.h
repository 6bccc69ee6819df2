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
  std::int64_t vocab_extra_ids = 0;  // PretrainedFromHF: <extra_id_0> ... as special tokens
};

// Whether the program has --vocab-extra-ids: Megatron's arguments.py does, tools/preprocess_data.py
// does not (it sets 0 itself), which keeps `--vocab` an unambiguous abbreviation there.
enum class VocabExtraIdsFlag : bool { kAbsent, kPresent };

// Registers --tokenizer-type, --vocab-file, --merge-file, --tokenizer-model,
// --tokenizer-name-or-path, --make-vocab-size-divisible-by, --pad-vocab-size-to and, when asked,
// --vocab-extra-ids.
void add_tokenizer_flags(FlagSet& flags, TokenizerArgs& args, const std::string& default_type,
                         VocabExtraIdsFlag extra_ids);

}  // namespace mds::config
