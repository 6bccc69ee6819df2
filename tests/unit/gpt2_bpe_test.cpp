#include "text/gpt2_bpe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "text/gpt2_pretokenizer.h"
#include "text/token_cache.h"
#include "text/unicode_classes.h"

namespace mds::text {
namespace {

using Ids = std::vector<std::int32_t>;

const GPT2BPETokenizer& official() {
  static const GPT2BPETokenizer tokenizer(MDS_DATA_DIR "/gpt2/vocab.json",
                                          MDS_DATA_DIR "/gpt2/merges.txt");
  return tokenizer;
}

std::string fixture(const std::string& name) {
  return MDS_FIXTURES_DIR "/text/" + name;
}

std::vector<std::string> pretokens(std::string_view text) {
  std::vector<std::string> pieces;
  Gpt2PreTokenizer pretokenizer(text);
  std::string_view piece;
  while (pretokenizer.next(piece)) pieces.emplace_back(piece);
  return pieces;
}

// The message of the base::Error that `body` throws, or "" if it throws none.
template <typename Body>
std::string error_of(Body body) {
  try {
    body();
  } catch (const base::Error& error) {
    return error.what();
  }
  return "";
}

struct Vector {
  std::string text;
  Ids ids;
};

// data.md §8.1, verified against upstream.
const std::vector<Vector>& spec_vectors() {
  static const std::vector<Vector> vectors = {
      {"Hello world", {15496, 995}},
      {"Hello world!", {15496, 995, 0}},
      {" Hello", {18435}},
      {"hello  world", {31373, 220, 995}},
      {"The quick brown fox.", {464, 2068, 7586, 21831, 13}},
      {"It's", {1026, 338}},
      {"I'M", {40, 6, 44}},
      {"don't DON'T", {9099, 470, 23917, 6, 51}},
      {"we'll've", {732, 1183, 1053}},
      {"'s 's", {338, 705, 82}},
      {"Mr. O'Neil's", {5246, 13, 440, 6, 29354, 338}},
      {"<|endoftext|>", {27, 91, 437, 1659, 5239, 91, 29}},
      {"", {}},
      {" ", {220}},
      {"  ", {220, 220}},
      {"    four", {220, 220, 220, 1440}},
      {"\n", {198}},
      {"a\n\nb", {64, 198, 198, 65}},
      {"a  \n b", {64, 220, 220, 198, 275}},
      {"foo\r\nbar", {21943, 201, 198, 5657}},
      {"\t\tindent", {197, 197, 521, 298}},
      {"trailing  ", {9535, 4386, 220, 220}},
      {"  leading", {220, 3756}},
      {"123456", {10163, 29228}},
      {"3.14159", {18, 13, 1415, 19707}},
      {"$1,000.00", {3, 16, 11, 830, 13, 405}},
      {"10,000,000", {940, 11, 830, 11, 830}},
      {"1st 2nd 3rd", {16, 301, 362, 358, 513, 4372}},
      {"HTTP/1.1 200 OK", {40717, 14, 16, 13, 16, 939, 7477}},
      {"e-mail: a@b.c", {68, 12, 4529, 25, 257, 31, 65, 13, 66}},
      {"ok?!...", {482, 12248, 986}},
      {"Hello, world! How's it going?", {15496, 11, 995, 0, 1374, 338, 340, 1016, 30}},
      {"caf\u00e9", {66, 1878, 2634}},
      {"na\u00efve fa\u00e7ade", {2616, 38776, 24685, 16175, 671}},
      {"\u00df", {39683}},
      {"\u65e5\u672c\u8a9e", {33768, 98, 17312, 105, 45739, 252}},
      {"\U0001F600", {47249, 222}},
      {"\U0001F469\u200d\U0001F4BB", {41840, 102, 447, 235, 8582, 240, 119}},
      {"\u00a0x", {1849, 87}},
      {"a\u00a0b", {64, 1849, 65}},
      {"x\u3000y", {87, 5099, 222, 88}},
      {"\u2028x", {447, 101, 87}},
      {"x\x1cy", {87, 216, 88}},
      {"x\u0085y", {87, 126, 227, 88}},
      {std::string(1, '\0'), {188}},
      {"\u200b", {9525}},
      {"x\u0301", {87, 136, 223}},
      {"\u0661\u0662\u0663", {149, 94, 149, 95, 149, 96}},
      {"\ufb01", {171, 105, 223}},
      {"\uff46\uff55\uff4c\uff4c", {171, 121, 228, 171, 121, 243, 171, 121, 234, 171, 121, 234}},
  };
  return vectors;
}

TEST(Gpt2Bpe, OfficialVocabulary) {
  EXPECT_EQ(official().type_name(), "GPT2BPETokenizer");
  EXPECT_EQ(official().vocab_size(), 50257);
  EXPECT_EQ(official().eod(), 50256);
  EXPECT_EQ(official().merges().size(), 50000u);
}

TEST(Gpt2Bpe, EncodesSpecVectors) {
  const auto encoder = official().make_encoder();
  for (const Vector& vector : spec_vectors()) {
    Ids ids;
    encoder->encode(vector.text, ids);
    EXPECT_EQ(ids, vector.ids) << "text: \"" << vector.text << "\"";
    // Second time through the warm cache, appending to what is there.
    Ids twice = ids;
    encoder->encode(vector.text, twice);
    EXPECT_EQ(twice.size(), 2 * ids.size());
    EXPECT_TRUE(std::equal(ids.begin(), ids.end(), twice.begin() + ids.size()));
  }
}

TEST(Gpt2Bpe, DecodeInvertsEncode) {
  for (const Vector& vector : spec_vectors()) {
    EXPECT_EQ(official().decode(vector.ids), vector.text);
  }
}

TEST(Gpt2Bpe, DecodesSpecVectors) {
  EXPECT_EQ(official().decode(Ids{98}), "\ufffd");
  EXPECT_EQ(official().decode(Ids{33768}), "\ufffd");
  EXPECT_EQ(official().decode(Ids{33768, 98}), "\u65e5");
  EXPECT_EQ(official().decode(Ids{50256}), "<|endoftext|>");
  EXPECT_EQ(official().decode(Ids{0, 1, 2}), "!\"#");
  EXPECT_EQ(official().decode(Ids{220, 50256, 198}), " <|endoftext|>\n");
  EXPECT_EQ(official().decode(Ids{}), "");
}

TEST(Gpt2Bpe, DecodeRejectsIdsOutsideTheVocab) {
  EXPECT_NE(error_of([] {
              official().decode(Ids{15496, 50257});
            }).find("token id 50257"),
            std::string::npos);
  EXPECT_NE(error_of([] { official().decode(Ids{-1}); }).find("token id -1"), std::string::npos);
}

TEST(Gpt2Bpe, WhitespaceEdgeCases) {
  using Pieces = std::vector<std::string>;
  // Expected pieces from regex.findall with `regex` 2022.10.31.
  EXPECT_EQ(pretokens("a \n"), (Pieces{"a", " \n"}));
  EXPECT_EQ(pretokens("end  "), (Pieces{"end", "  "}));
  EXPECT_EQ(pretokens("x \u00a0 y"), (Pieces{"x", " \u00a0", " y"}));
  EXPECT_EQ(pretokens("\u00a0\u00a0x"), (Pieces{"\u00a0", "\u00a0", "x"}));
  EXPECT_EQ(pretokens("a\u3000\u3000b"), (Pieces{"a", "\u3000", "\u3000", "b"}));
  EXPECT_EQ(pretokens("\u2028\u2028"), (Pieces{"\u2028\u2028"}));
  EXPECT_EQ(pretokens("a\u0085 b"), (Pieces{"a", "\u0085", " b"}));
  EXPECT_EQ(pretokens("\x1c\x1d "), (Pieces{"\x1c\x1d", " "}));
  EXPECT_EQ(pretokens("a \x1c"
                      "b"),
            (Pieces{"a", " \x1c", "b"}));
  EXPECT_EQ(pretokens("  \t x"), (Pieces{"  \t", " x"}));
  EXPECT_EQ(pretokens("x\r\n\r\ny"), (Pieces{"x", "\r\n\r", "\n", "y"}));
  EXPECT_EQ(pretokens("'s'S'll'LL"), (Pieces{"'s", "'", "S", "'ll", "'", "LL"}));
  EXPECT_EQ(pretokens("x.'s"), (Pieces{"x", ".'", "s"}));
  EXPECT_EQ(pretokens(" 'll"), (Pieces{" '", "ll"}));
  EXPECT_EQ(pretokens("1'd"), (Pieces{"1", "'d"}));

  EXPECT_EQ(official().encode("a \n"), (Ids{64, 220, 198}));
  EXPECT_EQ(official().encode("end  "), (Ids{437, 220, 220}));
  EXPECT_EQ(official().encode("x \u00a0 y"), (Ids{87, 5624, 331}));
  EXPECT_EQ(official().encode("a\u3000\u3000b"), (Ids{64, 5099, 222, 5099, 222, 65}));
  EXPECT_EQ(official().encode("\u2028\u2028"), (Ids{447, 101, 447, 101}));
  EXPECT_EQ(official().encode("a\u0085 b"), (Ids{64, 126, 227, 275}));
  EXPECT_EQ(official().encode("\x1c\x1d "), (Ids{216, 217, 220}));
  EXPECT_EQ(official().encode("x\r\n\r\ny"), (Ids{87, 201, 198, 201, 198, 88}));
}

TEST(Gpt2Bpe, AsciiFastPathEqualsGeneralPath) {
  // next() takes an inline shortcut for all-ASCII runs; pretoken_length is the general machine.
  const std::vector<std::string> pool = {
      " ",      " ",      " ",      "a",      "Z",          "q",    "7",        "0",     ".",
      "'",      "s",      "t",      "l",      "\n",         "\t",   "\r",       "\x1c",  "-",
      "\u00e9", "\u00a0", "\u3000", "\u0661", "\U0001F600", "\xff", "\xe6\x97", "\u2028"};
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int length = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < length; ++i) text += pool[rng() % pool.size()];
    std::vector<std::string> general;
    for (std::string_view rest = text; !rest.empty();) {
      const std::size_t n = Gpt2PreTokenizer::pretoken_length(rest);
      ASSERT_GT(n, 0u);
      general.emplace_back(rest.substr(0, n));
      rest.remove_prefix(n);
    }
    ASSERT_EQ(pretokens(text), general) << text;
  }
}

TEST(Gpt2Bpe, TokenCacheStaysBoundedAndCorrect) {
  TokenCache cache;
  std::vector<std::string> keys;
  // Enough entries to fill the slot table and force at least one reset.
  const std::size_t count = TokenCache::kMaxSlots / 2 + 100000;
  for (std::size_t i = 0; i < count; ++i) {
    std::string key = std::to_string(i * 2654435761u);
    if (i % 3 == 0) key = "prefix__" + key;  // same first 8 bytes, longer than 8
    if (i % 7 == 0) key = key.substr(0, 2 + i % 3);
    keys.push_back(std::move(key));
  }
  std::size_t found_before_insert = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const TokenCache::Key key = TokenCache::make_key(keys[i]);
    std::span<const std::int32_t> ids;
    if (cache.find(key, ids)) {
      ++found_before_insert;  // a short key repeated earlier
      continue;
    }
    const Ids value(1 + i % 3, static_cast<std::int32_t>(i));
    cache.insert(key, value);
    ASSERT_TRUE(cache.find(key, ids));
    ASSERT_EQ(Ids(ids.begin(), ids.end()), value);
  }
  EXPECT_GE(cache.resets(), 1u);
  EXPECT_LE(cache.size(), TokenCache::kMaxSlots / 2);
  EXPECT_GT(found_before_insert, 0u);
  // Entries since the last reset are all still there with their own ids.
  std::size_t checked = 0;
  for (std::size_t i = count - 1000; i < count; ++i) {
    std::span<const std::int32_t> ids;
    if (keys[i].size() <= 4) continue;
    ASSERT_TRUE(cache.find(TokenCache::make_key(keys[i]), ids)) << keys[i];
    EXPECT_EQ(ids[0], static_cast<std::int32_t>(i));
    ++checked;
  }
  EXPECT_GT(checked, 500u);
}

TEST(Gpt2Bpe, InvalidUtf8NeitherCrashesNorHangs) {
  // Callers pass valid UTF-8; here each bad byte is a one-byte "other" character.
  const std::string bad = "ab\xe6\x97 \xff\xfe x\xc3";
  EXPECT_EQ(pretokens(bad),
            (std::vector<std::string>{"ab", "\xe6\x97", " \xff\xfe", " x", "\xc3"}));
  const Ids ids = official().encode(bad);
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(official().decode(ids), "ab\ufffd \ufffd\ufffd x\ufffd");
}

// Generous enough for unoptimized sanitizer builds; upstream's quadratic loop would need hours
// on a megabyte of random letters.
#ifdef NDEBUG
constexpr double kLongPieceSeconds = 5.0;
#else
constexpr double kLongPieceSeconds = 60.0;
#endif

TEST(Gpt2Bpe, LongPreTokens) {
  // One 1 MB pre-token each: a letter run, an '=' run (the "other" class) and random letters
  // (thousands of distinct merges). Fast, and reversible.
  std::mt19937 rng(11);
  std::string random_letters(1 << 20, 'a');
  for (char& c : random_letters) c = static_cast<char>('a' + rng() % 26);
  for (const std::string& text :
       {std::string(1 << 20, 'a'), std::string(1 << 20, '='), random_letters}) {
    ASSERT_EQ(pretokens(text).size(), 1u);
    const auto start = std::chrono::steady_clock::now();
    const Ids ids = official().encode(text);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, kLongPieceSeconds);
    EXPECT_LT(ids.size(), text.size() * 2 / 3);
    EXPECT_EQ(official().decode(ids), text);
  }
}

TEST(Gpt2Bpe, LongMixedTextMatchesPieceByPiece) {
  // Pre-tokens past the cache's key limit and the quadratic threshold, next to short ones.
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "Lorem ipsum " + std::string(static_cast<std::size_t>(i * 13), 'z') + " 12345" +
            std::string(static_cast<std::size_t>(i * 7), '7') + "!!" + std::string(300, '-');
  }
  const auto encoder = official().make_encoder();
  Ids whole;
  encoder->encode(text, whole);
  Ids pieces;
  const auto fresh = official().make_encoder();
  for (const std::string& piece : pretokens(text)) fresh->encode(piece, pieces);
  EXPECT_EQ(whole, pieces);
  EXPECT_EQ(official().decode(whole), text);
}

TEST(Gpt2Bpe, TinyFixture) {
  const GPT2BPETokenizer tiny(fixture("tiny_vocab.json"), fixture("tiny_merges.txt"));
  EXPECT_EQ(tiny.vocab_size(), 10);
  EXPECT_EQ(tiny.eod(), 7);
  EXPECT_EQ(tiny.encode("abc"), (Ids{4}));
  EXPECT_EQ(tiny.encode(" abc"), (Ids{5, 4}));
  EXPECT_EQ(tiny.encode(" a"), (Ids{6}));
  EXPECT_EQ(tiny.encode("abcabc d"), (Ids{4, 4, 5, 8}));
  // Symbols missing from the vocab become id 0, like upstream's encoder.get(token, 0).
  EXPECT_EQ(tiny.encode("xyz"), (Ids{0, 0, 0}));
  EXPECT_EQ(tiny.encode("<|endoftext|>"), (Ids{0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(tiny.decode(Ids{4, 5, 6, 7}), "abc  a<|endoftext|>");
  EXPECT_NE(error_of([&] { tiny.decode(Ids{10}); }).find("not in the GPT-2 vocabulary"),
            std::string::npos);
}

TEST(Gpt2Bpe, MergesWithoutFinalNewlineLoseTheLastMerge) {
  const GPT2BPETokenizer tiny(fixture("tiny_vocab.json"), fixture("tiny_merges_no_newline.txt"));
  EXPECT_EQ(tiny.merges().size(), 2u);
  EXPECT_EQ(tiny.encode(" a"), (Ids{5, 0}));
  EXPECT_EQ(tiny.encode("abc"), (Ids{4}));
}

TEST(Gpt2Bpe, CrlfMergesAreLikeLf) {
  const GPT2BPETokenizer tiny(fixture("tiny_vocab.json"), fixture("tiny_merges_crlf.txt"));
  EXPECT_EQ(tiny.merges().size(), 3u);
  EXPECT_EQ(tiny.encode(" abc a"), (Ids{5, 4, 6}));
}

TEST(Gpt2Bpe, DuplicateMergeKeepsItsLastRank) {
  // "b c" is on lines 1 and 3: rank 2 (the last), so "a b" (rank 1) wins: abc -> ab c.
  const GPT2BPETokenizer tiny(fixture("tiny_vocab.json"), fixture("tiny_merges_duplicates.txt"));
  EXPECT_EQ(tiny.merges().size(), 2u);
  EXPECT_EQ(tiny.encode("abc"), (Ids{3, 2}));
  EXPECT_EQ(tiny.encode("bcbc"), (Ids{9, 9}));
}

TEST(Gpt2Bpe, MergesParsingFollowsPython) {
  const std::string path = "inline.txt";
  // Universal newlines: a lone \r ends a line too; the text after the last newline is dropped.
  EXPECT_EQ(parse_gpt2_merges("#v\ra b\rab c\rx y", path).size(), 2u);
  EXPECT_EQ(parse_gpt2_merges("", path).size(), 0u);
  EXPECT_EQ(parse_gpt2_merges("#version only", path).size(), 0u);
  EXPECT_EQ(parse_gpt2_merges("#v\n", path).size(), 0u);
  // A blank line takes a rank and matches nothing.
  const auto merges = parse_gpt2_merges("#v\n\n \t\na  b\n", path);
  ASSERT_EQ(merges.size(), 3u);
  EXPECT_TRUE(merges[0].left.empty());
  EXPECT_TRUE(merges[1].left.empty());
  EXPECT_EQ(merges[2].left, U"a");
  EXPECT_EQ(merges[2].right, U"b");
}

TEST(Gpt2Bpe, VocabParsingFollowsPython) {
  const auto entries = parse_gpt2_vocab(
      " {\"\\u0120the\": 262, \"a\\\"\\\\\\/\\n\": 1, \"\\ud83d\\ude00\": 2, \"\\ud800x\": 3,"
      " \"\u00e9\": -0, \"a\": 5}\n",
      "inline.json");
  ASSERT_EQ(entries.size(), 6u);
  EXPECT_EQ(entries[0].token, U"\u0120the");
  EXPECT_EQ(entries[0].id, 262);
  EXPECT_EQ(entries[1].token, U"a\"\\/\n");
  EXPECT_EQ(entries[2].token, U"\U0001F600");
  EXPECT_EQ(entries[3].token, (std::u32string{0xD800, U'x'}));
  EXPECT_EQ(entries[4].token, U"\u00e9");
  EXPECT_EQ(entries[4].id, 0);
  // A repeated key: the last id wins, the size counts it once.
  const GPT2BPETokenizer tokenizer({{U"a", 1}, {U"b", 2}, {U"a", 3}}, {});
  EXPECT_EQ(tokenizer.vocab_size(), 2);
  EXPECT_EQ(tokenizer.encode("ab"), (Ids{3, 2}));
  EXPECT_EQ(tokenizer.eod(), std::nullopt);
}

TEST(Gpt2Bpe, FileErrorsAreOneClearLine) {
  const std::string missing =
      error_of([] { GPT2BPETokenizer(fixture("no_such_vocab.json"), fixture("tiny_merges.txt")); });
  EXPECT_NE(missing.find("gpt2 vocab file"), std::string::npos) << missing;
  EXPECT_NE(missing.find("no_such_vocab.json"), std::string::npos) << missing;
  EXPECT_NE(missing.find("No such file"), std::string::npos) << missing;

  const std::string bad_json =
      error_of([] { GPT2BPETokenizer(fixture("bad_vocab.json"), fixture("tiny_merges.txt")); });
  EXPECT_NE(bad_json.find("bad_vocab.json:2:6: invalid JSON: expected ':'"), std::string::npos)
      << bad_json;

  const std::string bad_merges =
      error_of([] { GPT2BPETokenizer(fixture("tiny_vocab.json"), fixture("bad_merges.txt")); });
  EXPECT_NE(bad_merges.find("bad_merges.txt line 3: expected two symbols, found 3"),
            std::string::npos)
      << bad_merges;

  const std::string missing_merges =
      error_of([] { GPT2BPETokenizer(fixture("tiny_vocab.json"), fixture("no_such_merges.txt")); });
  EXPECT_NE(missing_merges.find("gpt2 merges file: cannot open"), std::string::npos)
      << missing_merges;

  for (const char* json :
       {"", "[]", "{\"a\": 1,}", "{\"a\": 1.5}", "{\"a\": 1e3}", "{\"a\": 99999999999}",
        "{\"a\": -2}", "{\"a\": 1} x", "{a: 1}", "{\"a\\q\": 1}", "{\"a\": 01}", "{\"a\t\": 1}",
        "\xEF\xBB\xBF{}", "{\"\xff\": 1}", "{\"a\": 1"}) {
    const std::string message = error_of([&] { parse_gpt2_vocab(json, "v.json"); });
    EXPECT_NE(message.find("gpt2 vocab file v.json"), std::string::npos) << json;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(Gpt2Bpe, ByteAlphabet) {
  const auto& table = gpt2_byte_to_unicode();
  EXPECT_EQ(table[' '], U'\u0120');
  EXPECT_EQ(table['\n'], U'\u010A');
  EXPECT_EQ(table['\t'], U'\u0109');
  EXPECT_EQ(table['\r'], U'\u010D');
  EXPECT_EQ(table[0x7F], U'\u0121');
  EXPECT_EQ(table[0xA0], U'\u0142');
  EXPECT_EQ(table[0xAD], U'\u0143');
  EXPECT_EQ(table['A'], U'A');
  for (int b = 0; b < 256; ++b) EXPECT_EQ(gpt2_unicode_to_byte(table[b]), b);
  EXPECT_EQ(gpt2_unicode_to_byte(U' '), -1);
  EXPECT_EQ(gpt2_unicode_to_byte(U'\u0144'), -1);
}

TEST(UnicodeClasses, MatchRegexModule) {
  EXPECT_EQ(char_class(U'a'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'\u00aa'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'\u65e5'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'5'), CharClass::kNumber);
  EXPECT_EQ(char_class(U'\u0661'), CharClass::kNumber);
  EXPECT_EQ(char_class(U'\u00bd'), CharClass::kNumber);
  EXPECT_EQ(char_class(U'\u2165'), CharClass::kNumber);  // Nl
  EXPECT_EQ(char_class(U'\x1c'), CharClass::kOther);
  EXPECT_EQ(char_class(U'\u200b'), CharClass::kOther);
  EXPECT_EQ(char_class(U'\u0301'), CharClass::kOther);  // Mn
  EXPECT_EQ(char_class(U'\U0001F600'), CharClass::kOther);
  EXPECT_EQ(char_class(0x110000), CharClass::kOther);
  // Unicode 15.0 additions are letters, e.g. U+31350 (CJK Extension H) and U+11F04 (Kawi).
  EXPECT_EQ(char_class(0x31350), CharClass::kLetter);
  EXPECT_EQ(char_class(0x11F04), CharClass::kLetter);
  int spaces = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) spaces += char_class(cp) == CharClass::kSpace;
  EXPECT_EQ(spaces, 25);
  const UnicodeRangeTable table = unicode_ranges();
  for (std::uint32_t i = 0; i < table.size; ++i) {
    EXPECT_LE(table.ranges[i].first, table.ranges[i].last);
    if (i > 0) {
      EXPECT_LT(table.ranges[i - 1].last, table.ranges[i].first);
    }
  }
}

// Test-only hook for tests/e2e/unicode_tables_test.py: with MDS_UNICODE_ORACLE_DIR set, writes the
// class of every code point (classes.bin, one byte each), and for the UTF-8 file pretok_in.txt
// there, the byte length of each pre-token (pretok_out.txt) and the official GPT-2 ids
// (ids_out.txt), one number per line, for comparison with `regex` and upstream's Python code.
}  // namespace
}  // namespace mds::text
