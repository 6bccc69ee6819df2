// A Hugging Face `tokenizer.json` (the `tokenizers` library's serialization) read into the parts
// mds implements: byte-level BPE models with no normalizer or NFC, such as GPT-2's, BLOOM's and
// GPT-NeoX's. Anything else (another model type or normalizer, a pre-tokenizer or regex mds does
// not know) is refused with one line naming the file and the field, never approximated.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mds::text {

// One entry of `added_tokens`: matched in the raw text before pre-tokenization.
struct HfAddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;  // absorbs the whitespace before a match
  bool rstrip = false;  // and after it
  bool normalized = true;
};

// The Split pre-tokenizer patterns mds knows, each written by hand (the `tokenizers` library
// runs them with Oniguruma).
enum class HfSplitPattern : std::uint8_t {
  kBloom,  // " ?[^(\s|[.,!?…。，、।۔،])]+" (BLOOM)
  kGpt2,   // GPT-2's pre-tokenizer regex, as ByteLevel's use_regex applies it
};

// One pre-tokenizer step, applied to every piece the steps before produced.
struct HfPreTokenizerStep {
  enum class Kind : std::uint8_t {
    kSplitIsolated,  // matches and the text between them become pieces (behavior Isolated)
    kByteLevel,      // optional prefix space, then GPT-2's regex when use_regex
  };
  Kind kind = Kind::kByteLevel;
  HfSplitPattern pattern = HfSplitPattern::kGpt2;  // kSplitIsolated
  bool add_prefix_space = false;                   // kByteLevel
  bool use_regex = true;                           // kByteLevel
};

// A TemplateProcessing post-processor's template for one sequence: special tokens' ids around
// the sequence's own (`sequence` marks where those go).
struct HfTemplatePiece {
  bool sequence = false;
  std::vector<std::int32_t> ids;  // the special token's ids, when !sequence
};

struct HfTokenizerJson {
  std::vector<std::pair<std::string, std::int32_t>> vocab;  // keys in the byte-level alphabet
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<HfAddedToken> added_tokens;
  bool nfc_normalizer = false;  // the text between added tokens is put in NFC first
  std::vector<HfPreTokenizerStep> pre_tokenizer;
  bool pre_tokenizer_is_byte_level = false;  // the top-level pre-tokenizer itself is ByteLevel
  // Empty: the ids are the sequence's own (no post-processor, or ByteLevel's, which only moves
  // offsets).
  std::vector<HfTemplatePiece> single_template;
  // The `padding` settings' pad_token (transformers takes it as the pad token when the class is
  // given none); empty when the file has no padding.
  std::string padding_pad_token;
};

// Parses the text of a tokenizer.json; `path` names it in errors ("PATH: model.type: ...").
HfTokenizerJson parse_hf_tokenizer_json(std::string_view text, const std::string& path);

}  // namespace mds::text
