#include "text/unicode_nfc.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "text/utf8.h"

namespace mds::text {
namespace {

struct CombiningClassRange {
  char32_t first;
  char32_t last;
  std::uint8_t combining_class;
};

struct Decomposition {
  char32_t code_point;
  std::uint16_t offset;  // into kDecompositionPool
  std::uint8_t length;
};

struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

#include "text/unicode_nfc_tables.inc"

// The generator checks that every code point below U+0300 is quick yes: in UTF-8, the ASCII bytes
// and the two-byte sequences whose lead byte is below that of U+0300.
constexpr char32_t kFirstNotQuickYes = 0x300;
constexpr unsigned char kFirstLeadByteToCheck = 0xC0 | (kFirstNotQuickYes >> 6);

// Hangul syllables are composed and decomposed arithmetically (The Unicode Standard, 3.12).
constexpr char32_t kSyllableFirst = 0xAC00;
constexpr char32_t kLeadingFirst = 0x1100;
constexpr char32_t kVowelFirst = 0x1161;
constexpr char32_t kTrailingBase = 0x11A7;  // one before the first trailing consonant
constexpr char32_t kLeadingCount = 19;
constexpr char32_t kVowelCount = 21;
constexpr char32_t kTrailingCount = 28;  // counting "no trailing consonant"
constexpr char32_t kSyllablesPerLeading = kVowelCount * kTrailingCount;
constexpr char32_t kSyllableCount = kLeadingCount * kSyllablesPerLeading;

struct CodePoint {
  char32_t value;
  std::uint8_t combining_class;
};

// A set of code points as the generator writes it: index[cp >> 8] names the block of 256 bits.
struct Bitmap {
  std::span<const std::uint8_t> index;
  std::span<const std::array<std::uint64_t, 4>> blocks;

  constexpr bool contains(char32_t cp) const {
    const std::size_t block = cp >> 8;
    if (block >= index.size()) return false;
    return ((blocks[index[block]][(cp >> 6) & 3] >> (cp & 63)) & 1) != 0;
  }
};

constexpr Bitmap kNotQuickYes{kQuickCheckIndex, kQuickCheckBlocks};
constexpr Bitmap kDecomposable{kDecomposableIndex, kDecomposableBlocks};

bool is_quick_yes(char32_t cp) {
  return !kNotQuickYes.contains(cp);
}

std::uint8_t combining_class(char32_t cp) {
  if (is_quick_yes(cp)) return 0;
  const auto* end = std::end(kCombiningClassRanges);
  const auto* range =
      std::lower_bound(std::begin(kCombiningClassRanges), end, cp,
                       [](const CombiningClassRange& r, char32_t value) { return r.last < value; });
  return range != end && range->first <= cp ? range->combining_class : 0;
}

void append_code_point(std::vector<CodePoint>& out, char32_t cp) {
  out.push_back({cp, combining_class(cp)});
}

void append_decomposition(std::vector<CodePoint>& out, char32_t cp) {
  if (cp - kSyllableFirst < kSyllableCount) {
    const char32_t index = cp - kSyllableFirst;
    out.push_back({kLeadingFirst + index / kSyllablesPerLeading, 0});
    out.push_back({kVowelFirst + (index % kSyllablesPerLeading) / kTrailingCount, 0});
    if (index % kTrailingCount != 0) out.push_back({kTrailingBase + index % kTrailingCount, 0});
    return;
  }
  if (!kDecomposable.contains(cp)) {
    append_code_point(out, cp);
    return;
  }
  const auto* found =
      std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                       [](const Decomposition& d, char32_t value) { return d.code_point < value; });
  for (std::size_t i = 0; i < found->length; ++i) {
    append_code_point(out, kDecompositionPool[found->offset + i]);
  }
}

std::optional<char32_t> compose_hangul(char32_t first, char32_t second) {
  if (first - kLeadingFirst < kLeadingCount && second - kVowelFirst < kVowelCount) {
    return kSyllableFirst +
           ((first - kLeadingFirst) * kVowelCount + (second - kVowelFirst)) * kTrailingCount;
  }
  const bool is_lv_syllable =
      first - kSyllableFirst < kSyllableCount && (first - kSyllableFirst) % kTrailingCount == 0;
  if (is_lv_syllable && second - kTrailingBase - 1 < kTrailingCount - 1) {
    return first + (second - kTrailingBase);
  }
  return std::nullopt;
}

std::optional<char32_t> compose_pair(char32_t first, char32_t second) {
  if (is_quick_yes(second)) return std::nullopt;  // never the second of a composition
  if (const auto hangul = compose_hangul(first, second)) return hangul;
  const auto* end = std::end(kCompositions);
  const auto* found = std::lower_bound(std::begin(kCompositions), end, std::pair{first, second},
                                       [](const Composition& c, std::pair<char32_t, char32_t> key) {
                                         return std::pair{c.first, c.second} < key;
                                       });
  if (found == end || found->first != first || found->second != second) return std::nullopt;
  return found->composite;
}

// Stable sort by combining class of one run of non-starters. Runs are almost always a few marks
// long and sorted by insertion, which needs no buffer; long ones (hostile input) get stable_sort's
// O(n log n).
void sort_marks(std::vector<CodePoint>::iterator begin, std::vector<CodePoint>::iterator end) {
  constexpr std::ptrdiff_t kInsertionSortLimit = 16;
  const auto by_class = [](const CodePoint& a, const CodePoint& b) {
    return a.combining_class < b.combining_class;
  };
  if (end - begin > kInsertionSortLimit) {
    std::stable_sort(begin, end, by_class);
    return;
  }
  for (auto it = begin + 1; it < end; ++it) {
    const CodePoint mark = *it;
    auto hole = it;
    for (; hole != begin && by_class(mark, *(hole - 1)); --hole) *hole = *(hole - 1);
    *hole = mark;
  }
}

void reorder_marks(std::vector<CodePoint>& chars) {
  auto run = chars.begin();
  while (run != chars.end()) {
    run = std::find_if(run, chars.end(), [](const CodePoint& c) { return c.combining_class != 0; });
    const auto run_end =
        std::find_if(run, chars.end(), [](const CodePoint& c) { return c.combining_class == 0; });
    if (run_end - run > 1) sort_marks(run, run_end);
    run = run_end;
  }
}

// The canonical composition algorithm, in place: a code point joins the last starter unless a code
// point between them is a starter or has a class at least its own (it is "blocked").
void compose(std::vector<CodePoint>& chars) {
  constexpr std::size_t kNoStarter = static_cast<std::size_t>(-1);
  std::size_t starter = kNoStarter;
  std::size_t kept = 0;
  for (const CodePoint c : chars) {
    const bool adjacent = kept > 0 && starter == kept - 1;
    const bool blocked = starter == kNoStarter ||
                         (!adjacent && chars[kept - 1].combining_class >= c.combining_class);
    if (!blocked) {
      if (const auto composite = compose_pair(chars[starter].value, c.value)) {
        chars[starter].value = *composite;
        continue;
      }
    }
    if (c.combining_class == 0) starter = kept;
    chars[kept++] = c;
  }
  chars.resize(kept);
}

void normalize_span(std::string_view span, std::vector<CodePoint>& scratch, std::string& out) {
  scratch.clear();
  for (std::size_t pos = 0; pos < span.size();) {
    const DecodedChar c = decode_char_at(span, pos);
    append_decomposition(scratch, c.code_point);
    pos += c.length;
  }
  reorder_marks(scratch);
  compose(scratch);
  for (const CodePoint c : scratch) append_utf8(out, c.value);
}

std::size_t skip_ascii(std::string_view text, std::size_t pos) {
  while (text.size() - pos >= 8) {
    std::uint64_t word;
    std::memcpy(&word, text.data() + pos, 8);
    if ((word & 0x8080808080808080ull) != 0) break;
    pos += 8;
  }
  while (pos < text.size() && static_cast<unsigned char>(text[pos]) < 0x80) ++pos;
  return pos;
}

// The byte length of the valid UTF-8 sequence that starts with `lead`.
std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  return lead < 0xF0 ? 3 : 4;
}

// Whether the code point of the valid sequence at `p` is quick yes. It decodes without
// decode_char_at's validity checks: this is the loop over all non-ASCII text.
bool starts_quick_yes(const unsigned char* p) {
  if (p[0] < kFirstLeadByteToCheck) return true;
  if (p[0] < 0xE0) return is_quick_yes((char32_t{p[0] & 0x1Fu} << 6) | (p[1] & 0x3Fu));
  if (p[0] < 0xF0) {
    return is_quick_yes((char32_t{p[0] & 0x0Fu} << 12) | (char32_t{p[1] & 0x3Fu} << 6) |
                        (p[2] & 0x3Fu));
  }
  return is_quick_yes((char32_t{p[0] & 0x07u} << 18) | (char32_t{p[1] & 0x3Fu} << 12) |
                      (char32_t{p[2] & 0x3Fu} << 6) | (p[3] & 0x3Fu));
}

constexpr std::size_t kNotFound = std::string_view::npos;

// Offset of the first code point at or after `pos` that is not quick yes, or kNotFound.
std::size_t find_not_quick_yes(std::string_view text, std::size_t pos) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  while (pos < text.size()) {
    if (bytes[pos] < 0x80) {
      pos = skip_ascii(text, pos);
      continue;
    }
    if (!starts_quick_yes(bytes + pos)) return pos;
    pos += sequence_length(bytes[pos]);
  }
  return kNotFound;
}

// Offset of the first quick-yes code point after the one at `pos`, or the text's size.
std::size_t find_quick_yes_after(std::string_view text, std::size_t pos) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  pos += sequence_length(bytes[pos]);
  while (pos < text.size() && !starts_quick_yes(bytes + pos)) pos += sequence_length(bytes[pos]);
  return pos;
}

// Start of the code point before the one at `pos`, but not before `floor`.
std::size_t previous_code_point(std::string_view text, std::size_t pos, std::size_t floor) {
  if (pos == floor) return floor;
  --pos;
  while (pos > floor && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

}  // namespace

bool is_nfc_quick_yes(std::string_view utf8) {
  return find_not_quick_yes(utf8, 0) == kNotFound;
}

// A quick-yes code point is a boundary NFC changes never cross, so the text is copied as it is up
// to the last one before a code point that is not quick yes, and normalized from there to the next
// one.
std::string nfc_normalize(std::string_view utf8) {
  std::size_t needs_work = find_not_quick_yes(utf8, 0);
  if (needs_work == kNotFound) return std::string(utf8);
  std::string out;
  out.reserve(utf8.size() + utf8.size() / 8);
  std::vector<CodePoint> scratch;
  std::size_t copied = 0;
  while (needs_work != kNotFound) {
    const std::size_t span_begin = previous_code_point(utf8, needs_work, copied);
    const std::size_t span_end = find_quick_yes_after(utf8, needs_work);
    out.append(utf8, copied, span_begin - copied);
    normalize_span(utf8.substr(span_begin, span_end - span_begin), scratch, out);
    copied = span_end;
    needs_work = find_not_quick_yes(utf8, span_end);
  }
  out.append(utf8, copied);
  return out;
}

}  // namespace mds::text
