// The tokenizer.json reader on arbitrary bytes: parse_hf_tokenizer_json either fails with
// base::Error or gives a tokenizer, which is then built as load_hf_tokenizer builds one for a
// tokenizer.json named directly (bare_file_setup, added tokens, transformers' tokens, the class
// rewrites), once with no additional special tokens and once with two (--vocab-extra-ids), and
// made to encode a few fixed texts (ASCII, multi-byte, whitespace runs, NFC-sensitive marks, and
// texts built from the added tokens' contents). Invariants:
// - every string the reader hands out is valid UTF-8 (added tokens' contents, vocabulary keys);
// - every id encode gives is one the tokenizer holds: a vocabulary id, an added token's id or an
//   id of the post-processor's template. A file may number its vocabulary sparsely (the library
//   accepts {"a": 1000}), so ids below vocab_size() are checked only for files whose own ids all
//   are;
// - decode of those ids gives valid UTF-8 and fails (base::Error) only when the ids include a
//   template id that is neither a vocabulary nor an added token's id.
// Anything else escaping (another exception type, a crash, a sanitizer report, a hang) is a bug.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/error.h"
#include "text/hf_added_tokens.h"
#include "text/hf_bpe_tokenizer.h"
#include "text/hf_tokenizer_files.h"
#include "text/hf_tokenizer_json.h"
#include "text/hf_transformers_setup.h"
#include "text/utf8.h"

namespace {

void check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "hf_tokenizer_json_fuzz: invariant violated: %s\n", what);
    std::abort();
  }
}

bool is_valid_utf8(std::string_view text) {
  return !mds::text::find_invalid_utf8(text).has_value();
}

constexpr std::string_view kTexts[] = {
    "Hello world, the tokenizer's test.",
    "ab ab  abc\tb\n\n  a",
    "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 \xD0\xBF\xD1\x80\xD0\xB8",
    "e\xCC\x81 A\xCC\x8A\xCC\x81 \xE1\x84\x80\xE1\x85\xA1",  // decomposed: NFC changes it
    "   \t \xE2\x80\x83 \xC2\xA0 x",                         // whitespace runs, Unicode spaces
    "",
};

void build_and_encode(const mds::text::HfTokenizerJson& parsed,
                      const std::vector<std::string>& additional_special_tokens) {
  using namespace mds::text;
  const HfTokenizerJson& json = parsed;  // a bare file's setup rewrites nothing
  const HfAssembledTokenizer assembled =
      assemble_hf_tokenizer(parsed, bare_file_setup(additional_special_tokens));
  const HfAddedVocabulary& added = assembled.added;
  const HfBpeTokenizer& tokenizer = *assembled.tokenizer;

  // The ids the tokenizer holds, and whether they are all below vocab_size().
  std::unordered_set<std::int32_t> decodable, template_ids;
  for (const auto& [key, id] : added.model_vocab()) decodable.insert(id);
  const std::vector<HfAddedToken> patterns = added.patterns();
  for (const HfAddedToken& token : patterns) decodable.insert(token.id);
  for (const HfTemplatePiece& piece : json.single_template) {
    template_ids.insert(piece.ids.begin(), piece.ids.end());
  }
  const std::int64_t vocab_size = tokenizer.vocab_size();
  check(vocab_size >= 0, "vocab_size() is not negative");
  bool dense = true;
  for (const auto& [key, id] : json.vocab) dense = dense && id < vocab_size;
  for (const std::int32_t id : template_ids) dense = dense && id < vocab_size;

  std::vector<std::string> texts(std::begin(kTexts), std::end(kTexts));
  std::string with_added = "x";
  for (const HfAddedToken& token : patterns) {
    texts.push_back(token.content);
    with_added += token.content + " " + token.content + "  \u00e9" + token.content + "ab";
  }
  texts.push_back(with_added);
  // The first few tokens' contents glued together, and with whitespace around them.
  std::string glued, spaced;
  for (std::size_t i = 0; i < std::min<std::size_t>(patterns.size(), 4); ++i) {
    glued += patterns[i].content;
    spaced += "  " + patterns[i].content + " \t";
  }
  texts.push_back(glued);
  texts.push_back(spaced);

  const auto encoder = tokenizer.make_encoder();
  for (const std::string& text : texts) {
    if (!is_valid_utf8(text)) continue;  // cannot happen: checked by the caller
    std::vector<std::int32_t> ids;
    encoder->encode(text, ids);
    bool template_only = false;  // an id only the template knows
    for (const std::int32_t id : ids) {
      const bool known = decodable.contains(id);
      check(known || template_ids.contains(id), "encode gives only ids the tokenizer holds");
      if (dense) check(id >= 0 && id < vocab_size, "every id is below vocab_size()");
      template_only = template_only || !known;
    }
    try {
      check(is_valid_utf8(tokenizer.decode(ids)), "decode gives valid UTF-8");
    } catch (const mds::base::Error&) {
      check(template_only, "decode fails only on an id no token holds");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  mds::text::HfTokenizerJson json;
  try {
    json = mds::text::parse_hf_tokenizer_json(input, "fuzz/tokenizer.json");
  } catch (const mds::base::Error&) {
    return 0;
  }
  for (const auto& token : json.added_tokens) {
    check(is_valid_utf8(token.content), "added token contents are valid UTF-8");
    check(!token.content.empty(), "added token contents are not empty");
  }
  for (const auto& [key, id] : json.vocab) {
    check(is_valid_utf8(key), "vocabulary keys are valid UTF-8");
    check(id >= 0, "vocabulary ids are not negative");
  }
  for (const auto& [left, right] : json.merges) {
    check(is_valid_utf8(left) && is_valid_utf8(right), "merge parts are valid UTF-8");
  }
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, mds::text::extra_id_tokens(2)}) {
    try {
      build_and_encode(json, extra);
    } catch (const mds::base::Error&) {
    }
  }
  return 0;
}
