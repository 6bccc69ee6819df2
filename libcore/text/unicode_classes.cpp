#include "text/unicode_classes.h"

#include <array>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mds::text {
namespace {

constexpr CharClass L = CharClass::kLetter;
constexpr CharClass N = CharClass::kNumber;
constexpr CharClass S = CharClass::kSpace;

constexpr UnicodeRange kRanges[] = {
#include "text/unicode_tables.inc"
};

constexpr char32_t kCodePoints = 0x110000;
constexpr int kBlockBits = 8;
constexpr char32_t kBlockSize = 1u << kBlockBits;
constexpr char32_t kBlocks = kCodePoints / kBlockSize;

// Two-stage lookup built once from the ranges: block index per 256 code points, and the distinct
// 256-entry blocks (about 60 KB in all, against 1.1 MB for a flat table).
class ClassTable {
 public:
  ClassTable() {
    std::vector<CharClass> flat(kCodePoints, CharClass::kOther);
    for (const UnicodeRange& range : kRanges) {
      for (char32_t cp = range.first; cp <= range.last; ++cp) flat[cp] = range.cls;
    }
    std::unordered_map<std::string_view, std::uint16_t> seen;
    for (char32_t block = 0; block < kBlocks; ++block) {
      const CharClass* begin = flat.data() + block * kBlockSize;
      const std::string_view key(reinterpret_cast<const char*>(begin), kBlockSize);
      const auto [it, added] = seen.try_emplace(key, static_cast<std::uint16_t>(seen.size()));
      if (added) blocks_.insert(blocks_.end(), begin, begin + kBlockSize);
      index_[block] = it->second;
    }
  }

  CharClass get(char32_t cp) const {
    if (cp >= kCodePoints) return CharClass::kOther;
    return blocks_[(std::size_t{index_[cp >> kBlockBits]} << kBlockBits) | (cp & (kBlockSize - 1))];
  }

 private:
  std::array<std::uint16_t, kBlocks> index_{};
  std::vector<CharClass> blocks_;
};

const ClassTable& table() {
  static const ClassTable instance;
  return instance;
}

}  // namespace

CharClass char_class(char32_t code_point) {
  return table().get(code_point);
}

UnicodeRangeTable unicode_ranges() {
  return {kRanges, static_cast<std::uint32_t>(std::size(kRanges))};
}

CharClass char_class_unicode14(char32_t c) {
  // The letters (L) and numbers (N) Unicode 15.0 assigned, found by comparing every code point's
  // class under `regex` 2022.10.31 with the tokenizers library's ByteLevel regex (tokenizers
  // 0.19.1); nothing else differs, White_Space included.
  static constexpr std::pair<char32_t, char32_t> kNewInUnicode15[] = {
      {0x1123F, 0x11240}, {0x11F02, 0x11F02}, {0x11F04, 0x11F10}, {0x11F12, 0x11F33},
      {0x11F50, 0x11F59}, {0x1342F, 0x1342F}, {0x13441, 0x13446}, {0x1B132, 0x1B132},
      {0x1B155, 0x1B155}, {0x1D2C0, 0x1D2D3}, {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D},
      {0x1E4D0, 0x1E4EB}, {0x1E4F0, 0x1E4F9}, {0x2B739, 0x2B739}, {0x31350, 0x323AF}};
  if (c >= 0x11000) {
    for (const auto& [first, last] : kNewInUnicode15) {
      if (c >= first && c <= last) return CharClass::kOther;
    }
  }
  return char_class(c);
}

}  // namespace mds::text
