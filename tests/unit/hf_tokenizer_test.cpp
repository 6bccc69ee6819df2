// The PretrainedFromHF pieces on small hand-made inputs (tests/e2e/hf_tokenizer_oracle_test.py
// compares whole tokenizers with transformers): BLOOM's split as the `tokenizers` library splits
// (the expected pieces were printed by it), added tokens found leftmost-longest in two passes with
// lstrip/rstrip, tokenizer.json parsing and its one-line refusals, the template post-processor,
// decoding and transformers' clean-up of decoded spaces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "text/gpt2_bpe.h"
#include "text/hf_added_tokens.h"
#include "text/hf_bpe_tokenizer.h"
#include "text/hf_pretokenizers.h"
#include "text/hf_tokenizer_json.h"
#include "text/utf8.h"

namespace mds::text {
namespace {

std::vector<std::string> bloom_pieces(std::string_view text) {
  const HfPreTokenizer pre({{HfPreTokenizerStep::Kind::kSplitIsolated, HfSplitPattern::kBloom},
                            {HfPreTokenizerStep::Kind::kByteLevel, HfSplitPattern::kGpt2,
                             /*add_prefix_space=*/false, /*use_regex=*/false}});
  std::vector<std::string> pieces;
  pre.split(text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(HfPreTokenizer, BloomSplitAsTheTokenizersLibrary) {
  EXPECT_EQ(bloom_pieces("Hello, world!  Two  spaces\tx ( y ) | z"),
            (Pieces{"Hello", ",", " world", "! ", " Two", " ", " spaces", "\t", "x", " (", " y",
                    " ) |", " z"}));
  // White_Space breaks words (U+3000, U+00A0), a zero-width space (not White_Space) does not;
  // BLOOM's CJK and Devanagari punctuation break them too.
  EXPECT_EQ(bloom_pieces("a\u3000b\u00a0c\u200bd"),
            (Pieces{"a", "\u3000", "b", "\u00a0", "c\u200bd"}));
  EXPECT_EQ(bloom_pieces("東京。大阪、x।"), (Pieces{"東京", "。", "大阪", "、", "x", "।"}));
  EXPECT_EQ(bloom_pieces("  "), (Pieces{"  "}));
  EXPECT_EQ(bloom_match_length(" !"), 0u);
  EXPECT_EQ(bloom_match_length(" ab c"), 3u);
}

TEST(HfPreTokenizer, ByteLevelPrefixSpaceAndRegex) {
  const HfPreTokenizer pre({{HfPreTokenizerStep::Kind::kByteLevel, HfSplitPattern::kGpt2,
                             /*add_prefix_space=*/true, /*use_regex=*/true}});
  Pieces pieces;
  pre.split("Hello world's", [&](std::string_view piece) { pieces.emplace_back(piece); });
  EXPECT_EQ(pieces, (Pieces{" Hello", " world", "'s"}));
}

struct Split {
  std::vector<std::string> texts;
  std::vector<std::int32_t> ids;
  std::string order;  // "t" for a text, "a" for an added token
};

Split split(const HfAddedTokenSplitter& splitter, std::string_view text) {
  Split out;
  splitter.split(
      text,
      [&](std::string_view piece) {
        out.texts.emplace_back(piece);
        out.order += 't';
      },
      [&](std::int32_t id) {
        out.ids.push_back(id);
        out.order += 'a';
      });
  return out;
}

HfAddedToken added(std::int32_t id, std::string content, bool normalized, bool lstrip = false,
                   bool rstrip = false) {
  HfAddedToken token;
  token.id = id;
  token.content = std::move(content);
  token.normalized = normalized;
  token.lstrip = lstrip;
  token.rstrip = rstrip;
  return token;
}

TEST(HfAddedTokens, LeftmostLongestThenOnAfterTheMatch) {
  const HfAddedTokenSplitter splitter(
      {added(1, "ab", true), added(2, "abc", true), added(3, "bcd", true)});
  const Split s = split(splitter, "xabcdab");
  EXPECT_EQ(s.order, "tata");
  EXPECT_EQ(s.texts, (Pieces{"x", "d"}));
  EXPECT_EQ(s.ids, (std::vector<std::int32_t>{2, 1}));
}

TEST(HfAddedTokens, RawTokensFirstThenNormalizedOnesBetweenThem) {
  // "s>x" (normalized) would match inside "<s>x" first in one pass; "<s>" (not normalized) wins.
  const HfAddedTokenSplitter splitter({added(5, "s>x", true), added(6, "<s>", false)});
  const Split s = split(splitter, "<s>x s>x");
  EXPECT_EQ(s.order, "ata");
  EXPECT_EQ(s.ids, (std::vector<std::int32_t>{6, 5}));
  EXPECT_EQ(s.texts, (Pieces{"x "}));
}

TEST(HfAddedTokens, LstripAndRstripAbsorbWhitespace) {
  const HfAddedTokenSplitter splitter(
      {added(7, "<m>", false, true, false), added(8, "<r>", false, true, true)});
  EXPECT_EQ(split(splitter, "a \u3000<m> b").texts, (Pieces{"a", " b"}));
  EXPECT_EQ(split(splitter, "a  <r>\t b").texts, (Pieces{"a", "b"}));
  EXPECT_EQ(split(splitter, "<r> <m>x").order, "aat");  // the space went with <r>
}

TEST(HfAddedTokens, SingleWordTokensAreRefused) {
  HfAddedToken token = added(9, "<w>", false);
  token.single_word = true;
  EXPECT_THROW(HfAddedTokenSplitter({token}), base::Error);
}

TEST(HfAddedVocabulary, AnIdPastTheInt32RangeFailsWithOneLine) {
  HfAddedVocabulary vocabulary({{"a", 2147483647}});
  try {
    vocabulary.add_tokens({added(0, "a", false), added(1, "b", false)});
    FAIL() << "no error";
  } catch (const base::Error& error) {
    EXPECT_NE(std::string(error.what()).find("\"b\" would get id 2147483648"), std::string::npos)
        << error.what();
  }
}

// A tokenizer.json over the 256 byte symbols (ids 0..255 in byte order) and `merges_json`.
std::string tokenizer_json(const std::string& merges_json, const std::string& extra_vocab,
                           const std::string& post_processor = "null") {
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    std::string key;
    append_utf8(key, gpt2_byte_to_unicode()[b]);
    if (key == "\"" || key == "\\") key = "\\" + key;
    vocab += "\"" + key + "\": " + std::to_string(b) + ", ";
  }
  vocab += extra_vocab;
  return R"({"version": "1.0", "added_tokens": [
      {"id": 300, "content": "<s>", "special": true, "normalized": false, "lstrip": false,
       "rstrip": false, "single_word": false},
      {"id": 301, "content": "</s>", "special": true, "normalized": false, "lstrip": false,
       "rstrip": false, "single_word": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": )" +
         post_processor + R"(,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "vocab": {)" +
         vocab + R"(}, "merges": )" + merges_json + "}}";
}

const char kExtraVocab[] = R"("he": 256, "hel": 257, "Ġw": 258, "<s>": 300, "</s>": 301)";

TEST(HfBpeTokenizer, EncodesWithMergesInEitherFormat) {
  for (const std::string merges :
       {R"(["h e", "he l", "Ġ w"])", R"([["h", "e"], ["he", "l"], ["Ġ", "w"]])"}) {
    const HfBpeTokenizer tokenizer(
        parse_hf_tokenizer_json(tokenizer_json(merges, kExtraVocab), "t"), {"</s>", true});
    EXPECT_EQ(tokenizer.encode("hello world</s>"),
              (std::vector<std::int32_t>{257, 'l', 'o', 258, 'o', 'r', 'l', 'd', 301}));
    EXPECT_EQ(tokenizer.eod(), 301);
    EXPECT_EQ(tokenizer.vocab_size(), 256 + 3 + 2);
    EXPECT_EQ(tokenizer.type_name(), "PretrainedFromHF");
  }
}

TEST(HfBpeTokenizer, NfcNormalizesTheTextAndNeedsValidUtf8) {
  std::string json = tokenizer_json(R"(["h e"])", kExtraVocab);
  const std::string no_normalizer = R"("normalizer": null)";
  json.replace(json.find(no_normalizer), no_normalizer.size(), R"("normalizer": {"type": "NFC"})");
  const HfBpeTokenizer tokenizer(parse_hf_tokenizer_json(json, "t"), {});
  EXPECT_EQ(tokenizer.encode("e\u0301"), tokenizer.encode("\u00e9"));
  EXPECT_NE(tokenizer.encode("e\u0301"), (std::vector<std::int32_t>{'e', 0xCC, 0x81}));
  EXPECT_THROW(tokenizer.encode(std::string("ok \xC3")), base::Error);
}

TEST(HfBpeTokenizer, TemplateAddsItsSpecialTokens) {
  const std::string post = R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [300], "tokens": ["<s>"]},
                                     "</s>": {"id": "</s>", "ids": [301], "tokens": ["</s>"]}}})";
  const HfBpeTokenizer tokenizer(
      parse_hf_tokenizer_json(tokenizer_json(R"(["h e"])", kExtraVocab, post), "t"), {});
  EXPECT_EQ(tokenizer.encode("he"), (std::vector<std::int32_t>{300, 256, 301}));
  EXPECT_EQ(tokenizer.encode(""), (std::vector<std::int32_t>{300, 301}));
}

TEST(HfBpeTokenizer, DecodesBytesAndAddedTokensThenCleansUpSpaces) {
  const HfTokenizerJson json = parse_hf_tokenizer_json(tokenizer_json("[]", kExtraVocab), "t");
  const HfBpeTokenizer clean(json, {std::nullopt, true});
  const HfBpeTokenizer raw(json, {std::nullopt, false});
  const std::vector<std::int32_t> ids = clean.encode("Hi , there . I 'm</s>\xC3\xA9");
  EXPECT_EQ(clean.decode(ids), "Hi, there. I'm</s>\xC3\xA9");
  EXPECT_EQ(raw.decode(ids), "Hi , there . I 'm</s>\xC3\xA9");
  EXPECT_EQ(raw.decode(std::vector<std::int32_t>{0xC3}), "\xEF\xBF\xBD");  // half a character
  EXPECT_THROW(raw.decode(std::vector<std::int32_t>{999}), base::Error);
  EXPECT_EQ(clean.eod(), std::nullopt);
}

TEST(HfBpeTokenizer, ACharacterMissingFromTheVocabularyIsDropped) {
  std::string json = tokenizer_json("[]", kExtraVocab);
  json.replace(json.find("\"a\": 97, "), 9, "");  // no id for the byte 'a'
  const HfBpeTokenizer tokenizer(parse_hf_tokenizer_json(json, "t"), {});
  EXPECT_EQ(tokenizer.encode("bab a"), (std::vector<std::int32_t>{'b', 'b', ' '}));
}

std::string parse_error(const std::string& json) {
  try {
    parse_hf_tokenizer_json(json, "tok.json");
  } catch (const base::Error& error) {
    return error.what();
  }
  return "";
}

TEST(HfTokenizerJson, RefusesWhatItDoesNotImplementNamingTheField) {
  const std::string good = tokenizer_json(R"(["h e"])", kExtraVocab);
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string json = good;
    json.replace(json.find(from), from.size(), to);
    return parse_error(json);
  };
  EXPECT_EQ(parse_error(good), "");
  EXPECT_NE(with(R"("normalizer": null)", R"("normalizer": {"type": "NFKC"})")
                .find("tok.json: normalizer: type NFKC is not supported"),
            std::string::npos);
  EXPECT_NE(
      with(R"(["h e"])", R"(["h e f"])").find("tok.json: model.merges[0]: must be two tokens"),
      std::string::npos);
  EXPECT_NE(with(R"("dropout": null)", R"("dropout": 0.1)").find("tok.json: model.dropout"),
            std::string::npos);
  EXPECT_NE(with(R"({"type": "ByteLevel", "add_prefix_space")", R"({"type": "Whitespace", "x")")
                .find("tok.json: pre_tokenizer.type: \"Whitespace\" is not supported"),
            std::string::npos);
  EXPECT_NE(with(R"("decoder": {"type": "ByteLevel"})", R"("decoder": null)").find("decoder"),
            std::string::npos);
  // A merge whose result the vocabulary lacks fails when the tokenizer is built.
  EXPECT_THROW(
      HfBpeTokenizer(parse_hf_tokenizer_json(tokenizer_json(R"(["x y"])", kExtraVocab), "t"), {}),
      base::Error);
}

TEST(HfBpeTokenizer, CleanUpTokenizationAsTransformers) {
  EXPECT_EQ(clean_up_tokenization("a . b ? c ! d , e ' f n't 'm 's 've 're"),
            "a. b? c! d, e'fn't'm's've're");  // transformers' own output
}

}  // namespace
}  // namespace mds::text
