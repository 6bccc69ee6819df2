#include "config/tokenizer_args.h"

#include "config/flags.h"

namespace mds::config {

void add_tokenizer_flags(FlagSet& flags, TokenizerArgs& args, const std::string& default_type,
                         VocabExtraIdsFlag extra_ids) {
  CLI::App& app = flags.app();
  const std::string group = "Tokenizer";
  args.tokenizer_type = default_type;
  CLI::Option* type =
      app.add_option("--tokenizer-type", args.tokenizer_type,
                     "GPT2BPETokenizer (byte-level BPE from --vocab-file and --merge-file), "
                     "SentencePieceTokenizer (from --tokenizer-model) or PretrainedFromHF (a "
                     "byte-level BPE tokenizer.json from --tokenizer-name-or-path)")
          ->check(
              CLI::IsMember({"GPT2BPETokenizer", "SentencePieceTokenizer", "BertWordPieceLowerCase",
                             "BertWordPieceCase", "PretrainedFromHF"}))
          ->group(group);
  if (default_type.empty()) {
    type->required();
  } else {
    type->capture_default_str();
  }
  app.add_option("--vocab-file", args.vocab_file, "GPT-2 vocab.json")->group(group);
  app.add_option("--merge-file", args.merge_file, "GPT-2 merges.txt")->group(group);
  app.add_option("--tokenizer-model", args.tokenizer_model, "SentencePiece .model file")
      ->group(group);
  app.add_option("--make-vocab-size-divisible-by", args.make_vocab_size_divisible_by,
                 "pad the vocabulary to a multiple of this (times the tensor-parallel size)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(group);
  app.add_option("--pad-vocab-size-to", args.pad_vocab_size_to,
                 "pad the vocabulary to exactly this size")
      ->group(group);
  app.add_option("--tokenizer-name-or-path", args.tokenizer_name_or_path,
                 "PretrainedFromHF: a tokenizer.json, the folder holding it, or a model name "
                 "already in the local Hugging Face cache")
      ->group(group);
  if (extra_ids == VocabExtraIdsFlag::kAbsent) return;
  app.add_option("--vocab-extra-ids", args.vocab_extra_ids,
                 "PretrainedFromHF: add <extra_id_0> ... <extra_id_N-1> as additional special "
                 "tokens (upstream's T5-style sentinels; other tokenizers refuse N > 0)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(group);
}

}  // namespace mds::config
