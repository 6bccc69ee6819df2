#include "text/gpt2_pretokenizer.h"

#include <array>
#include <cstdint>

#include "text/unicode_classes.h"

namespace mds::text {
namespace {

using Byte = unsigned char;

// CharClass of each ASCII byte (pretokenizer_detail::ByteClass has the same first four values).
constexpr std::array<CharClass, 128> make_ascii_classes() {
  std::array<CharClass, 128> classes{};
  for (int c = 0; c < 128; ++c) {
    classes[c] = static_cast<CharClass>(pretokenizer_detail::kByteClasses[c]);
  }
  return classes;
}
constexpr std::array<CharClass, 128> kAsciiClass = make_ascii_classes();
static_assert(static_cast<int>(CharClass::kLetter) == pretokenizer_detail::kLetter &&
              static_cast<int>(CharClass::kNumber) == pretokenizer_detail::kNumber &&
              static_cast<int>(CharClass::kSpace) == pretokenizer_detail::kSpace &&
              static_cast<int>(CharClass::kOther) == pretokenizer_detail::kOther);

struct Char {
  CharClass cls;
  std::uint32_t length;
};

// A non-ASCII character at p; anything Python's UTF-8 decoder would reject is a one-byte "other".
// ClassOf gives a code point's class (the Unicode version of the regex engine imitated).
template <CharClass (*ClassOf)(char32_t)>
Char decode_non_ascii(const Byte* p, const Byte* end) {
  const Byte lead = p[0];
  const std::size_t left = static_cast<std::size_t>(end - p);
  auto continuation = [&](std::size_t i) { return i < left && (p[i] & 0xC0) == 0x80; };
  char32_t cp;
  std::uint32_t length;
  if (lead < 0xC2 || lead > 0xF4) return {CharClass::kOther, 1};
  if (lead < 0xE0) {
    if (!continuation(1)) return {CharClass::kOther, 1};
    cp = ((lead & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    length = 2;
  } else if (lead < 0xF0) {
    if (!continuation(1) || !continuation(2)) return {CharClass::kOther, 1};
    if ((lead == 0xE0 && p[1] < 0xA0) || (lead == 0xED && p[1] >= 0xA0)) {
      return {CharClass::kOther, 1};
    }
    cp = ((lead & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    length = 3;
  } else {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return {CharClass::kOther, 1};
    if ((lead == 0xF0 && p[1] < 0x90) || (lead == 0xF4 && p[1] >= 0x90)) {
      return {CharClass::kOther, 1};
    }
    cp = ((lead & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    length = 4;
  }
  return {ClassOf(cp), length};
}

template <CharClass (*ClassOf)(char32_t)>
inline Char char_at(const Byte* p, const Byte* end) {
  if (*p < 0x80) return {kAsciiClass[*p], 1};
  return decode_non_ascii<ClassOf>(p, end);
}

// End of the run of characters of class `cls` starting at p.
template <CharClass (*ClassOf)(char32_t)>
const Byte* run_end(const Byte* p, const Byte* end, CharClass cls) {
  while (p < end) {
    if (*p < 0x80) {
      if (kAsciiClass[*p] != cls) break;
      ++p;
    } else {
      const Char c = decode_non_ascii<ClassOf>(p, end);
      if (c.cls != cls) break;
      p += c.length;
    }
  }
  return p;
}

// Length of a contraction ('s 't 're 've 'm 'll 'd) at p, or 0.
std::size_t contraction_length(const Byte* p, const Byte* end) {
  if (end - p < 2) return 0;
  const Byte second = p[1];
  if (second == 's' || second == 't' || second == 'm' || second == 'd') return 2;
  if (end - p < 3) return 0;
  const Byte third = p[2];
  if ((second == 'r' && third == 'e') || (second == 'v' && third == 'e') ||
      (second == 'l' && third == 'l')) {
    return 3;
  }
  return 0;
}

template <CharClass (*ClassOf)(char32_t)>
std::size_t general_pretoken_length(std::string_view text) {
  const Byte* const begin = reinterpret_cast<const Byte*>(text.data());
  const Byte* const end = begin + text.size();
  const Byte* p = begin;
  if (*p == '\'') {
    if (const std::size_t length = contraction_length(p, end)) return length;
  }
  Char first = char_at<ClassOf>(p, end);
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": a single U+0020 joins a following non-space run.
  if (*p == ' ' && p + 1 < end) {
    const Char second = char_at<ClassOf>(p + 1, end);
    if (second.cls != CharClass::kSpace) {
      ++p;
      first = second;
    }
  }
  if (first.cls != CharClass::kSpace) {
    return static_cast<std::size_t>(run_end<ClassOf>(p + first.length, end, first.cls) - begin);
  }
  // "\s+(?!\S)|\s+": a run that ends the text is taken whole; one followed by a non-space
  // character gives back its last character (which then starts the next pre-token) unless it
  // is the only one.
  const Byte* last = p;
  std::size_t count = 0;
  while (p < end) {
    const Char c = char_at<ClassOf>(p, end);
    if (c.cls != CharClass::kSpace) break;
    last = p;
    p += c.length;
    ++count;
  }
  if (p == end || count == 1) return static_cast<std::size_t>(p - begin);
  return static_cast<std::size_t>(last - begin);
}

}  // namespace

std::size_t Gpt2PreTokenizer::pretoken_length(std::string_view text, Classes classes) {
  return classes == Classes::kOniguruma ? general_pretoken_length<char_class_unicode14>(text)
                                        : general_pretoken_length<char_class>(text);
}

}  // namespace mds::text
