// NFC on small hand-made inputs; tests/e2e/unicode_nfc_oracle_test.py compares every code point and
// random text with the `tokenizers` library itself.
#include "text/unicode_nfc.h"

#include <gtest/gtest.h>

#include <string>

#include "text/utf8.h"

namespace mds::text {
namespace {

std::string utf8(std::u32string_view text) {
  std::string out;
  for (const char32_t c : text) append_utf8(out, c);
  return out;
}

std::u32string nfc(std::u32string_view text) {
  const std::string normalized = nfc_normalize(utf8(text));
  std::u32string out;
  for (std::size_t pos = 0; pos < normalized.size();) {
    const DecodedChar c = decode_char_at(normalized, pos);
    out.push_back(c.code_point);
    pos += c.length;
  }
  return out;
}

TEST(UnicodeNfc, AsciiIsCopied) {
  EXPECT_EQ(nfc_normalize(""), "");
  const std::string ascii = "The quick brown fox\tjumps\r\nover the lazy dog. \x01\x7f 0123456789";
  EXPECT_EQ(nfc_normalize(ascii), ascii);
  EXPECT_TRUE(is_nfc_quick_yes(ascii));
}

TEST(UnicodeNfc, PrecomposedTextIsKept) {
  for (const std::u32string text : {U"caf\u00e9 \u00dcn\u00efc\u00f6d\u00e9", U"\u03ac\u1e0d",
                                    U"\u65e5\u672c\u8a9e \U0001F600", U"\uac00\ud7a3"}) {
    EXPECT_EQ(nfc(text), text);
    EXPECT_TRUE(is_nfc_quick_yes(utf8(text)));
  }
}

TEST(UnicodeNfc, DecomposedTextIsRecomposed) {
  EXPECT_EQ(nfc(U"e\u0301"), U"\u00e9");
  EXPECT_EQ(nfc(U"A\u030a"), U"\u00c5");
  EXPECT_EQ(nfc(U"e\u0302\u0301"), U"\u1ebf");        // two steps: e + ^ + ' = ế
  EXPECT_EQ(nfc(U"e\u0301\u0302"), U"\u00e9\u0302");  // no composite of é and ^
  EXPECT_EQ(nfc(U"\u0b47\u0b3e"), U"\u0b4b");         // two starters compose
  EXPECT_EQ(nfc(U"\u00c7\u0301"), U"\u1e08");         // a composite composes further
  EXPECT_FALSE(is_nfc_quick_yes(utf8(U"e\u0301")));
  EXPECT_FALSE(is_nfc_quick_yes(utf8(U"\u0b3e")));  // may compose with what comes before
}

TEST(UnicodeNfc, MarksAreReorderedByCombiningClass) {
  EXPECT_EQ(nfc(U"q\u0307\u0323"), U"q\u0323\u0307");  // 230 after 220
  EXPECT_EQ(nfc(U"\u1e0b\u0323"), U"\u1e0d\u0307");    // UAX #15: ḋ + dot below = ḍ + dot above
  EXPECT_EQ(nfc(U"a\u0301\u0316"), U"\u00e1\u0316");
  EXPECT_EQ(nfc(U"x\u0301\u0302\u0316"), U"x\u0316\u0301\u0302");  // equal classes keep order
  std::u32string many = U"x";
  std::u32string sorted = U"x";
  for (int i = 0; i < 10; ++i) many += U"\u0301\u0316";
  sorted += std::u32string(10, U'\u0316') + std::u32string(10, U'\u0301');
  EXPECT_EQ(nfc(many), sorted);  // a run longer than the insertion sort handles
}

TEST(UnicodeNfc, SingletonsAreReplaced) {
  EXPECT_EQ(nfc(U"\u212b"), U"\u00c5");  // ANGSTROM SIGN
  EXPECT_EQ(nfc(U"\u2126"), U"\u03a9");  // OHM SIGN
  EXPECT_EQ(nfc(U"\u1f71"), U"\u03ac");
  EXPECT_EQ(nfc(U"\u0340"), U"\u0300");
  EXPECT_FALSE(is_nfc_quick_yes(utf8(U"\u212b")));
}

TEST(UnicodeNfc, ExcludedCompositesStayDecomposed) {
  EXPECT_EQ(nfc(U"\u0958"), U"\u0915\u093c");
  EXPECT_EQ(nfc(U"\u0915\u093c"), U"\u0915\u093c");
  EXPECT_EQ(nfc(U"\u2adc"), U"\u2add\u0338");
  EXPECT_EQ(nfc(U"\u0344"), U"\u0308\u0301");  // non-starter decomposition
  EXPECT_EQ(nfc(U"\U0001d15e"), U"\U0001d157\U0001d165");
}

TEST(UnicodeNfc, HangulComposesArithmetically) {
  EXPECT_EQ(nfc(U"\u1100\u1161"), U"\uac00");
  EXPECT_EQ(nfc(U"\u1100\u1161\u11a8"), U"\uac01");
  EXPECT_EQ(nfc(U"\uac00\u11a8"), U"\uac01");
  EXPECT_EQ(nfc(U"\u1112\u1175\u11c2"), U"\ud7a3");
  EXPECT_EQ(nfc(U"\uac00\u11a7"), U"\uac00\u11a7");  // U+11A7 is no trailing consonant
  EXPECT_EQ(nfc(U"\uac01\u11a8"), U"\uac01\u11a8");  // an LVT syllable takes no more
  EXPECT_EQ(nfc(U"\u1100\u1176"), U"\u1100\u1176");  // archaic vowel: no syllable
  EXPECT_EQ(nfc(U"\u1100\u0301\u1161"), U"\u1100\u0301\u1161");
  // Syllables in a span that is normalized are decomposed and composed again.
  EXPECT_EQ(nfc(U"\uac01\u0301\uac00\u0301"), U"\uac01\u0301\uac00\u0301");
  EXPECT_EQ(nfc(U"\uac00\u0301\u11a8"), U"\uac00\u0301\u11a8");
  EXPECT_FALSE(is_nfc_quick_yes(utf8(U"\u1161")));
}

TEST(UnicodeNfc, BlockedMarksDoNotCompose) {
  EXPECT_EQ(nfc(U"a\u0301\u0301"), U"\u00e1\u0301");
  EXPECT_EQ(nfc(U"a\u0305\u0301"), U"a\u0305\u0301");            // blocked by a mark of its class
  EXPECT_EQ(nfc(U"a\u0334\u0301"), U"\u00e1\u0334");             // a lower class does not block
  EXPECT_EQ(nfc(U"\u0b47\u0b3c\u0b3e"), U"\u0b47\u0b3c\u0b3e");  // a starter is blocked by any
  EXPECT_EQ(nfc(U"\u0301e"), U"\u0301e");
}

TEST(UnicodeNfc, MarksNewerThanUnicode9AreStarters) {
  // U+0D3B (class 9 since Unicode 10) is not moved before U+0316, as a current NFC would.
  EXPECT_EQ(nfc(U"a\u0316\u0d3b"), U"a\u0316\u0d3b");
  // U+1ABF (class 220 since Unicode 13) blocks U+0301 from composing with the 'a'.
  EXPECT_EQ(nfc(U"a\u1abf\u0301"), U"a\u1abf\u0301");
  // Unicode 13's composition U+11935 U+11930 -> U+11938 is not done.
  EXPECT_EQ(nfc(U"\U00011935\U00011930"), U"\U00011935\U00011930");
  EXPECT_EQ(nfc(U"\U00011938"), U"\U00011938");
  EXPECT_TRUE(is_nfc_quick_yes(utf8(U"\u0d3b\U00011930")));
}

TEST(UnicodeNfc, SpansKeepTheirNeighbours) {
  EXPECT_EQ(nfc(U"\u0301abc"), U"\u0301abc");
  EXPECT_EQ(nfc(U"abcdefghij e\u0301"), U"abcdefghij \u00e9");
  EXPECT_EQ(nfc(U"e\u0301e\u0301"), U"\u00e9\u00e9");
  EXPECT_EQ(nfc(U"\u65e5\u00e9\u212b\U0001F600e\u0301\u0316\u65e5\u212b"),
            U"\u65e5\u00e9\u00c5\U0001F600\u00e9\u0316\u65e5\u00c5");
  EXPECT_EQ(nfc(U"\U0001F600\U0001d15e\U0001F600"), U"\U0001F600\U0001d157\U0001d165\U0001F600");
  EXPECT_EQ(nfc(U"x\u00e9\u0316"), U"x\u00e9\u0316");  // é splits, 220 moves before 230, é again
}

}  // namespace
}  // namespace mds::text
