#pragma once
#include <cstdint>

namespace mds::text {

// Character classes of the GPT-2 pre-tokenizer regex, as the Python `regex` package 2022.10.31
// (Unicode 15.0) defines them: \p{L}, \p{N}, \s, and everything else.
enum class CharClass : std::uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

// Class of a code point; values above U+10FFFF (and surrogates) are kOther.
CharClass char_class(char32_t code_point);
// The same classes at Unicode 14.0, as Oniguruma 6.9.8 (the `tokenizers` library's regex engine)
// has them: the letters and numbers new in Unicode 15.0 are "other" there.
CharClass char_class_unicode14(char32_t code_point);

// Unicode's White_Space property (25 code points): Rust's char::is_whitespace and Oniguruma's \s,
// which the Hugging Face `tokenizers` library uses.
constexpr bool is_white_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The generated range table (unicode_tables.inc), for tests.
struct UnicodeRange {
  char32_t first;
  char32_t last;
  CharClass cls;
};
struct UnicodeRangeTable {
  const UnicodeRange* ranges;
  std::uint32_t size;
};
UnicodeRangeTable unicode_ranges();

}  // namespace mds::text
