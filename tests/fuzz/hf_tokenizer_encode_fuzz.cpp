// HfBpeTokenizer's encoder on arbitrary text, with two fixed tokenizers built once from embedded
// tokenizer.json text (all 256 byte symbols in the vocabulary, a few merges, added tokens).
//
// `plain`: no normalizer, pre-tokenizer Sequence[Split(BLOOM's regex), ByteLevel(no prefix
// space)], no post-processor, clean_up_tokenization_spaces false. Byte-level BPE over a full byte
// vocabulary loses nothing, so for valid UTF-8 text decode(encode(text)) == text exactly, with one
// legitimate exception: lstrip/rstrip added tokens absorb the whitespace next to a match, and
// their ids decode to the token's content alone. The tokenizer keeps such tokens (they are the
// splitter's trickiest path, with a token that starts with whitespace next to them), so the exact
// round trip is checked when the text contains none of the strip tokens' contents, and otherwise
// the weaker one: the decoded text is the text with some White_Space characters deleted.
// Invalid UTF-8 is outside Encoder::encode's contract; here it must still not crash, and its ids
// stay below vocab_size() (the plain tokenizer's path never decodes code points unchecked).
//
// `nfc`: normalizer NFC, ByteLevel(add_prefix_space) and a TemplateProcessing post-processor. For
// valid UTF-8, encode(text) == encode(nfc_normalize(text)) and every id is below vocab_size().
// Why that holds: its added tokens are `normalized` (matched in the NFC text, which is the same
// for text and nfc(text) since NFC is idempotent), except one raw special token, "[EOS]". Raw
// tokens are matched before normalization, which breaks the property for a content NFC can touch
// (">" + U+0338 composes to U+226F, so "<s>" would not do), but not for "[EOS]": "[" is a starter
// that never composes with what precedes it, nothing composes with "]" as the first character,
// and no character's NFC is one of its ASCII letters, so nfc(A + "[EOS]" + B) == nfc(A) + "[EOS]"
// + nfc(B) and the raw matches fall at the same places. Invalid UTF-8 is not given to it: NFC
// decodes without checks.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "text/gpt2_bpe.h"
#include "text/hf_bpe_tokenizer.h"
#include "text/hf_tokenizer_json.h"
#include "text/unicode_classes.h"
#include "text/unicode_nfc.h"
#include "text/utf8.h"

namespace {

void check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "hf_tokenizer_encode_fuzz: invariant violated: %s\n", what);
    std::abort();
  }
}

// Ġ = space, Ã © = the bytes of "é".
constexpr std::string_view kMergeVocab =
    R"("Ġt": 256, "he": 257, "Ġthe": 258, "in": 259, "er": 260, "Ã©": 261, "Ġa": 262)";
constexpr std::string_view kMerges = R"(["Ġ t", "h e", ["Ġt", "he"], "i n", ["e", "r"], "Ã ©",
    "Ġ a"])";

constexpr std::string_view kPlainAdded = R"([
  {"id": 0, "content": "<|endoftext|>", "special": true, "normalized": false},
  {"id": 0, "content": "<|end", "special": false, "normalized": false},
  {"id": 0, "content": "<L>", "special": false, "lstrip": true, "normalized": true},
  {"id": 0, "content": "<R>", "special": false, "rstrip": true, "normalized": true},
  {"id": 0, "content": "<LR>", "special": true, "lstrip": true, "rstrip": true,
   "normalized": false},
  {"id": 0, "content": " [W]", "special": false, "normalized": true},
  {"id": 0, "content": "  ", "special": false, "normalized": true}])";
constexpr std::string_view kPlainPreTokenizer = R"({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": " ?[^(\\s|[.,!?…。，、।۔،])]+"},
   "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})";
// The contents whose matches may absorb whitespace.
constexpr std::string_view kStripContents[] = {"<L>", "<R>", "<LR>"};

// ids: 263 "[EOS]", 264 "<s>", ... (HfAddedVocabulary numbers them after the vocabulary).
constexpr std::string_view kNfcAdded = R"([
  {"id": 0, "content": "[EOS]", "special": true, "normalized": false},
  {"id": 0, "content": "<s>", "special": true, "normalized": true},
  {"id": 0, "content": "<n>", "special": false, "lstrip": true, "rstrip": true,
   "normalized": true},
  {"id": 0, "content": "e\u0301x", "special": false, "normalized": true},
  {"id": 0, "content": " \u212b", "special": false, "normalized": true}])";
constexpr std::string_view kNfcPostProcessor = R"({"type": "TemplateProcessing",
  "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
             {"SpecialToken": {"id": "[EOS]", "type_id": 0}}],
  "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [264], "tokens": ["<s>"]},
                                 "[EOS]": {"id": "[EOS]", "ids": [263], "tokens": ["[EOS]"]}}})";

std::string tokenizer_json(std::string_view added, std::string_view normalizer,
                           std::string_view pre_tokenizer, std::string_view post_processor) {
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    std::string key;
    mds::text::append_utf8(key, mds::text::gpt2_byte_to_unicode()[static_cast<std::size_t>(b)]);
    if (key == "\"" || key == "\\") key = "\\" + key;
    vocab += "\"" + key + "\": " + std::to_string(b) + ", ";
  }
  vocab += kMergeVocab;
  std::string json = R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": )";
  json += added;
  json += R"(, "normalizer": )";
  json += normalizer;
  json += R"(, "pre_tokenizer": )";
  json += pre_tokenizer;
  json += R"(, "post_processor": )";
  json += post_processor;
  json += R"(, "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
      "use_regex": true}, "model": {"type": "BPE", "dropout": null, "unk_token": null,
      "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
      "byte_fallback": false, "vocab": {)";
  json += vocab;
  json += R"(}, "merges": )";
  json += kMerges;
  json += "}}";
  return json;
}

const mds::text::HfBpeTokenizer& plain_tokenizer() {
  static const auto tokenizer = std::make_unique<mds::text::HfBpeTokenizer>(
      mds::text::parse_hf_tokenizer_json(
          tokenizer_json(kPlainAdded, "null", kPlainPreTokenizer, "null"), "plain.json"),
      mds::text::HfTokenizerOptions{std::nullopt, false});
  return *tokenizer;
}

const mds::text::HfBpeTokenizer& nfc_tokenizer() {
  static const auto tokenizer = std::make_unique<mds::text::HfBpeTokenizer>(
      mds::text::parse_hf_tokenizer_json(
          tokenizer_json(kNfcAdded, R"({"type": "NFC"})",
                         R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})",
                         kNfcPostProcessor),
          "nfc.json"),
      mds::text::HfTokenizerOptions{std::nullopt, false});
  return *tokenizer;
}

// One encoder per tokenizer for the whole run, as preprocess keeps one per worker thread (a fresh
// one per input would spend most of the time setting up its cache).
mds::text::Encoder& plain_encoder() {
  static const auto encoder = plain_tokenizer().make_encoder();
  return *encoder;
}

mds::text::Encoder& nfc_encoder() {
  static const auto encoder = nfc_tokenizer().make_encoder();
  return *encoder;
}

void check_ids(const mds::text::HfBpeTokenizer& tokenizer, const std::vector<std::int32_t>& ids) {
  for (const std::int32_t id : ids) {
    check(id >= 0 && id < tokenizer.vocab_size(), "every id is below vocab_size()");
  }
}

// Whether `decoded` is `text` with some White_Space characters deleted.
bool deletes_only_white_space(std::string_view text, std::string_view decoded) {
  std::size_t t = 0, d = 0;
  while (t < text.size()) {
    const mds::text::DecodedChar c = mds::text::decode_char_at(text, t);
    if (d < decoded.size() && decoded.compare(d, c.length, text.substr(t, c.length)) == 0) {
      d += c.length;
    } else if (!mds::text::is_white_space(c.code_point)) {
      return false;
    }
    t += c.length;
  }
  return d == decoded.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool valid = !mds::text::find_invalid_utf8(text).has_value();
  try {
    const auto& plain = plain_tokenizer();
    std::vector<std::int32_t> ids;
    plain_encoder().encode(text, ids);
    check_ids(plain, ids);
    if (valid) {
      const std::string decoded = plain.decode(ids);
      bool may_strip = false;
      for (const std::string_view content : kStripContents) {
        may_strip = may_strip || text.find(content) != std::string_view::npos;
      }
      if (may_strip) {
        check(deletes_only_white_space(text, decoded),
              "decode(encode(text)) is text less some whitespace next to strip tokens");
      } else {
        check(decoded == text, "decode(encode(text)) == text");
      }
    }

    if (valid) {
      const auto& nfc = nfc_tokenizer();
      std::vector<std::int32_t> nfc_ids, normalized_ids;
      nfc_encoder().encode(text, nfc_ids);
      check_ids(nfc, nfc_ids);
      nfc_encoder().encode(mds::text::nfc_normalize(text), normalized_ids);
      check(nfc_ids == normalized_ids, "encode(text) == encode(nfc(text)) with an NFC normalizer");
      check(!mds::text::find_invalid_utf8(nfc.decode(nfc_ids)).has_value(),
            "decode gives valid UTF-8");
    }
  } catch (const mds::base::Error& e) {
    // The fixed tokenizers load, and encode fails only on a pre-token of 2 GiB.
    std::fprintf(stderr, "hf_tokenizer_encode_fuzz: unexpected error: %s\n", e.what());
    std::abort();
  }
  return 0;
}
