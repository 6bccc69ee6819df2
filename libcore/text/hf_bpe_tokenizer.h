// --tokenizer-type PretrainedFromHF for byte-level BPE tokenizers (GPT-2's, BLOOM's):
// the ids transformers' `tokenizer.encode(text)` gives, as upstream's _AutoTokenizer calls it
// (added tokens found first, NFC when the file asks for it, the pre-tokenizer, the BPE, the
// post-processor's template), and
// `tokenizer.decode(ids)` (ByteLevel decoding, then clean_up_tokenization_spaces when the
// tokenizer_config.json asks for it, as it does by default).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/bpe_merge.h"
#include "text/hf_added_tokens.h"
#include "text/hf_pretokenizers.h"
#include "text/hf_tokenizer_json.h"
#include "text/tokenizer.h"

namespace mds::text {

// What transformers adds to tokenizer.json's pipeline (hf_transformers_setup.h).
struct HfTokenizerOptions {
  std::optional<std::string> eos_token;  // its id is the end-of-document id
  bool clean_up_tokenization_spaces = true;
};

class HfBpeTokenizer final : public Tokenizer {
 public:
  // `added`: the added tokens as the tokenizers library and transformers build them (ids
  // included); without it, tokenizer.json's own added tokens.
  HfBpeTokenizer(const HfTokenizerJson& json, const HfAddedVocabulary& added,
                 const HfTokenizerOptions& options);
  HfBpeTokenizer(const HfTokenizerJson& json, const HfTokenizerOptions& options);

  std::string_view type_name() const override { return "PretrainedFromHF"; }
  // len(tokenizer): the distinct strings of the vocabulary and the added tokens.
  std::int64_t vocab_size() const override { return vocab_size_; }
  std::optional<std::int32_t> eod() const override { return eod_; }
  // The encoder keeps a pointer to this tokenizer, which must outlive it.
  std::unique_ptr<Encoder> make_encoder() const override;
  std::string decode(std::span<const std::int32_t> ids) const override;

  // The pieces of encoding, for the encoder.
  const MergeTable& merges() const { return merges_; }
  // Vocabulary id of an interned symbol, or -1 (a byte missing from the vocabulary is dropped,
  // as the `tokenizers` BPE drops characters it has no id for when there is no unk token).
  std::int32_t token_of_symbol(std::int32_t symbol) const { return symbol_token_[symbol]; }
  const HfAddedTokenSplitter& added_tokens() const { return added_; }
  bool nfc_normalizer() const { return nfc_normalizer_; }
  const HfPreTokenizer& pre_tokenizer() const { return pre_tokenizer_; }
  const std::vector<HfTemplatePiece>& single_template() const { return template_; }

 private:
  std::int64_t vocab_size_ = 0;
  std::optional<std::int32_t> eod_;
  bool clean_up_ = true;
  bool nfc_normalizer_ = false;
  MergeTable merges_;
  std::vector<std::int32_t> symbol_token_;
  HfAddedTokenSplitter added_;
  HfPreTokenizer pre_tokenizer_;
  std::vector<HfTemplatePiece> template_;
  std::unordered_map<std::int32_t, std::string> token_text_;  // id -> its string (UTF-8)
};

// transformers' clean_up_tokenization: " ." -> ".", " ?" -> "?", " !" -> "!", " ," -> ",",
// " ' " -> "'", " n't" -> "n't", " 'm" -> "'m", " 's" -> "'s", " 've" -> "'ve", " 're" -> "'re",
// each replace over the whole text in that order.
std::string clean_up_tokenization(std::string text);

}  // namespace mds::text
