// nfc_normalize and is_nfc_quick_yes on arbitrary text. The API takes valid UTF-8 only (it decodes
// without checks, for speed), so invalid input is skipped; two texts are checked per input:
//
// 1. The input itself, when it is valid UTF-8, against properties of NFC that do not depend on
//    the tables: (a) idempotence, nfc(nfc(x)) == nfc(x); (b) is_nfc_quick_yes(x) implies
//    nfc(x) == x; (c) the output is valid UTF-8; (d) locality: cutting x before any code point
//    that is quick yes on its own (a starter that never composes with what precedes it) changes
//    nothing, nfc(x) == nfc(x[:p]) + nfc(x[p:]), checked at a cut the input picks and at all of
//    them at once (the concatenation of nfc over every such chunk, a different span layout from
//    the one nfc_normalize uses internally).
// 2. A text over a small closed alphabet (each input byte picks one of kAlphabet's code points:
//    Latin letters, combining marks of four classes, precomposed letters, a singleton, a
//    multi-mark decomposition, Hangul jamo and syllables at the edges of their ranges), compared
//    with a reference written from the standard's algorithm (full decomposition, stable sort of
//    marks by class, canonical composition with blocking, Hangul by arithmetic) over a table of
//    that alphabet's closure, taken from Python's unicodedata (the same for these characters in
//    Unicode 9.0, the version mds follows). It shares no code or tables with nfc_normalize.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "text/unicode_nfc.h"
#include "text/utf8.h"

namespace {

void check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "unicode_nfc_fuzz: invariant violated: %s\n", what);
    std::abort();
  }
}

// The reference's universe: every code point the alphabet's texts can decompose or compose to.
struct CharInfo {
  char32_t code_point;
  std::uint8_t combining_class;
  char32_t decomposition[2];  // one level, canonical; zeros when none
};

constexpr CharInfo kChars[] = {
    {0x0020, 0, {}},
    {0x0041, 0, {}},
    {0x0061, 0, {}},
    {0x0065, 0, {}},
    {0x006F, 0, {}},
    {0x0078, 0, {}},
    {0x00C0, 0, {0x0041, 0x0300}},
    {0x00C1, 0, {0x0041, 0x0301}},
    {0x00C4, 0, {0x0041, 0x0308}},
    {0x00C5, 0, {0x0041, 0x030A}},
    {0x00E0, 0, {0x0061, 0x0300}},
    {0x00E1, 0, {0x0061, 0x0301}},
    {0x00E4, 0, {0x0061, 0x0308}},
    {0x00E5, 0, {0x0061, 0x030A}},
    {0x00E8, 0, {0x0065, 0x0300}},
    {0x00E9, 0, {0x0065, 0x0301}},
    {0x00EB, 0, {0x0065, 0x0308}},
    {0x00F2, 0, {0x006F, 0x0300}},
    {0x00F3, 0, {0x006F, 0x0301}},
    {0x00F6, 0, {0x006F, 0x0308}},
    {0x01A1, 0, {0x006F, 0x031B}},
    {0x01FA, 0, {0x00C5, 0x0301}},
    {0x01FB, 0, {0x00E5, 0x0301}},
    {0x0229, 0, {0x0065, 0x0327}},
    {0x0300, 230, {}},
    {0x0301, 230, {}},
    {0x0308, 230, {}},
    {0x030A, 230, {}},
    {0x031B, 216, {}},
    {0x0323, 220, {}},
    {0x0327, 202, {}},
    {0x0340, 230, {0x0300}},          // singleton: never composed back
    {0x0344, 230, {0x0308, 0x0301}},  // excluded from composition
    {0x1E8D, 0, {0x0078, 0x0308}},
    {0x1EA0, 0, {0x0041, 0x0323}},
    {0x1EA1, 0, {0x0061, 0x0323}},
    {0x1EB9, 0, {0x0065, 0x0323}},
    {0x1ECD, 0, {0x006F, 0x0323}},
    {0x1EDB, 0, {0x01A1, 0x0301}},
    {0x1EDD, 0, {0x01A1, 0x0300}},
    {0x1EE3, 0, {0x01A1, 0x0323}},
    {0x212B, 0, {0x00C5}},  // singleton
};

// The primary composites among kChars (NFC(first + second) is the composite).
struct Pair {
  char32_t first, second, composite;
};
constexpr Pair kCompositions[] = {
    {0x0041, 0x0300, 0x00C0}, {0x0041, 0x0301, 0x00C1}, {0x0041, 0x0308, 0x00C4},
    {0x0041, 0x030A, 0x00C5}, {0x0041, 0x0323, 0x1EA0}, {0x0061, 0x0300, 0x00E0},
    {0x0061, 0x0301, 0x00E1}, {0x0061, 0x0308, 0x00E4}, {0x0061, 0x030A, 0x00E5},
    {0x0061, 0x0323, 0x1EA1}, {0x0065, 0x0300, 0x00E8}, {0x0065, 0x0301, 0x00E9},
    {0x0065, 0x0308, 0x00EB}, {0x0065, 0x0323, 0x1EB9}, {0x0065, 0x0327, 0x0229},
    {0x006F, 0x0300, 0x00F2}, {0x006F, 0x0301, 0x00F3}, {0x006F, 0x0308, 0x00F6},
    {0x006F, 0x031B, 0x01A1}, {0x006F, 0x0323, 0x1ECD}, {0x0078, 0x0308, 0x1E8D},
    {0x00C5, 0x0301, 0x01FA}, {0x00E5, 0x0301, 0x01FB}, {0x01A1, 0x0300, 0x1EDD},
    {0x01A1, 0x0301, 0x1EDB}, {0x01A1, 0x0323, 0x1EE3},
};

// What an input byte picks from: some of kChars, and Hangul (ccc 0, no table entries) at the
// edges of the composable ranges (L 1100..1112, V 1161..1175, T 11A8..11C2, syllables
// AC00..D7A3) and just outside them.
constexpr char32_t kAlphabet[] = {
    0x0061, 0x0065, 0x006F, 0x0041, 0x0078, 0x0020, 0x0300, 0x0301, 0x0308, 0x030A,
    0x0323, 0x031B, 0x0327, 0x0344, 0x0340, 0x00E9, 0x00F6, 0x1ECD, 0x01A1, 0x1EDB,
    0x00C5, 0x212B, 0x1100, 0x1101, 0x1112, 0x1113, 0x1161, 0x1162, 0x1175, 0x1176,
    0x11A7, 0x11A8, 0x11A9, 0x11C2, 0x11C3, 0xAC00, 0xAC01, 0xD788, 0xD7A3, 0xAC1C,
};

constexpr char32_t kSyllableFirst = 0xAC00, kSyllableLast = 0xD7A3;
constexpr char32_t kLFirst = 0x1100, kLLast = 0x1112;
constexpr char32_t kVFirst = 0x1161, kVLast = 0x1175;
constexpr char32_t kTFirst = 0x11A8, kTLast = 0x11C2;  // T index 1..27 (0 is "none")

const CharInfo* info_of(char32_t cp) {
  for (const CharInfo& c : kChars) {
    if (c.code_point == cp) return &c;
  }
  return nullptr;
}

std::uint8_t combining_class_of(char32_t cp) {
  const CharInfo* c = info_of(cp);
  return c == nullptr ? 0 : c->combining_class;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSyllableFirst && cp <= kSyllableLast) {
    const char32_t index = cp - kSyllableFirst;
    out.push_back(kLFirst + index / (21 * 28));
    out.push_back(kVFirst + (index % (21 * 28)) / 28);
    if (index % 28 != 0) out.push_back(kTFirst - 1 + index % 28);
    return;
  }
  const CharInfo* c = info_of(cp);
  if (c == nullptr || c->decomposition[0] == 0) {
    out.push_back(cp);
    return;
  }
  for (const char32_t part : c->decomposition) {
    if (part != 0) decompose(part, out);
  }
}

char32_t compose(char32_t first, char32_t second) {
  if (first >= kLFirst && first <= kLLast && second >= kVFirst && second <= kVLast) {
    return kSyllableFirst + ((first - kLFirst) * 21 + (second - kVFirst)) * 28;
  }
  if (first >= kSyllableFirst && first <= kSyllableLast && (first - kSyllableFirst) % 28 == 0 &&
      second >= kTFirst && second <= kTLast) {
    return first + (second - kTFirst + 1);
  }
  for (const Pair& p : kCompositions) {
    if (p.first == first && p.second == second) return p.composite;
  }
  return 0;
}

std::string reference_nfc(const std::vector<char32_t>& text) {
  std::vector<char32_t> chars;
  for (const char32_t cp : text) decompose(cp, chars);
  // Canonical ordering: a stable sort of each run of non-starters by class.
  for (std::size_t i = 0; i < chars.size();) {
    if (combining_class_of(chars[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < chars.size() && combining_class_of(chars[end]) != 0) ++end;
    std::stable_sort(chars.begin() + static_cast<std::ptrdiff_t>(i),
                     chars.begin() + static_cast<std::ptrdiff_t>(end), [](char32_t a, char32_t b) {
                       return combining_class_of(a) < combining_class_of(b);
                     });
    i = end;
  }
  // Canonical composition: a character joins the last starter unless something between them is
  // a starter or has a class at least its own.
  std::vector<char32_t> out;
  std::ptrdiff_t starter = -1;
  int last_class = 0;
  for (const char32_t cp : chars) {
    const int cc = combining_class_of(cp);
    const bool adjacent = starter >= 0 && starter == static_cast<std::ptrdiff_t>(out.size()) - 1;
    if (starter >= 0 && (adjacent || (last_class != 0 && last_class < cc))) {
      if (const char32_t composite = compose(out[static_cast<std::size_t>(starter)], cp)) {
        out[static_cast<std::size_t>(starter)] = composite;
        continue;
      }
    }
    if (cc == 0) starter = static_cast<std::ptrdiff_t>(out.size());
    last_class = cc;
    out.push_back(cp);
  }
  std::string utf8;
  for (const char32_t cp : out) mds::text::append_utf8(utf8, cp);
  return utf8;
}

// Byte offsets where each code point of valid UTF-8 text starts.
std::vector<std::size_t> code_point_starts(std::string_view text) {
  std::vector<std::size_t> starts;
  for (std::size_t pos = 0; pos < text.size(); pos += mds::text::decode_char_at(text, pos).length) {
    starts.push_back(pos);
  }
  return starts;
}

bool is_valid_utf8(std::string_view text) {
  return !mds::text::find_invalid_utf8(text).has_value();
}

// Properties (a)-(d) of the top comment; `pick` chooses the single cut.
void check_properties(std::string_view text, std::size_t pick) {
  using mds::text::is_nfc_quick_yes;
  using mds::text::nfc_normalize;
  const std::string normalized = nfc_normalize(text);
  check(is_valid_utf8(normalized), "NFC output is valid UTF-8");
  check(nfc_normalize(normalized) == normalized, "NFC is idempotent");
  if (is_nfc_quick_yes(text)) check(normalized == text, "quick-yes text is unchanged");

  // The cuts: before each code point that is quick yes on its own.
  std::vector<std::size_t> cuts;
  for (const std::size_t start : code_point_starts(text)) {
    const std::size_t length = mds::text::decode_char_at(text, start).length;
    if (start > 0 && is_nfc_quick_yes(text.substr(start, length))) cuts.push_back(start);
  }
  if (cuts.empty()) return;
  const std::size_t cut = cuts[pick % cuts.size()];
  check(nfc_normalize(text.substr(0, cut)) + nfc_normalize(text.substr(cut)) == normalized,
        "NFC does not cross a quick-yes code point (one cut)");
  std::string chunked;
  std::size_t begin = 0;
  for (const std::size_t c : cuts) {
    chunked += nfc_normalize(text.substr(begin, c - begin));
    begin = c;
  }
  chunked += nfc_normalize(text.substr(begin));
  check(chunked == normalized, "NFC does not cross a quick-yes code point (every cut)");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t pick = size == 0 ? 0 : data[0];
  if (is_valid_utf8(input)) check_properties(input, pick);

  std::vector<char32_t> code_points;
  std::string text;
  for (std::size_t i = 0; i < size; ++i) {
    code_points.push_back(kAlphabet[data[i] % std::size(kAlphabet)]);
    mds::text::append_utf8(text, code_points.back());
  }
  const std::string expected = reference_nfc(code_points);
  if (mds::text::nfc_normalize(text) != expected) {
    std::fprintf(stderr, "unicode_nfc_fuzz: nfc_normalize differs from the reference on");
    for (const char32_t cp : code_points)
      std::fprintf(stderr, " U+%04X", static_cast<unsigned>(cp));
    std::fprintf(stderr, "\n");
    std::abort();
  }
  check_properties(text, pick);
  return 0;
}
