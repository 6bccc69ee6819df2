#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mds::text {

namespace pretokenizer_detail {

// Byte classes for the ASCII fast path; kNonAscii sends the pre-token to the general path.
enum ByteClass : std::uint8_t { kOther, kLetter, kNumber, kSpace, kNonAscii };

constexpr std::array<std::uint8_t, 256> make_byte_classes() {
  std::array<std::uint8_t, 256> classes{};
  for (int c = 0; c < 256; ++c) {
    if (c >= 0x80) {
      classes[c] = kNonAscii;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      classes[c] = kLetter;
    } else if (c >= '0' && c <= '9') {
      classes[c] = kNumber;
    } else if ((c >= 0x09 && c <= 0x0D) || c == ' ') {
      classes[c] = kSpace;  // not U+001C..U+001F: `regex` does not count them as \s
    } else {
      classes[c] = kOther;
    }
  }
  return classes;
}
inline constexpr std::array<std::uint8_t, 256> kByteClasses = make_byte_classes();

}  // namespace pretokenizer_detail

// Splits text into GPT-2 pre-tokens exactly as upstream's
//   regex.findall(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
//   text)
// does with the `regex` package 2022.10.31, as a hand-written state machine over UTF-8 (data.md
// §4.2). The pre-tokens partition the text. Bytes that are not valid UTF-8 count as one-byte
// characters of the "other" class (callers should not pass such text, but it never crashes).
class Gpt2PreTokenizer {
 public:
  // Which Unicode the classes follow: Python's `regex` (Unicode 15.0, upstream's GPT-2 tokenizer)
  // or Oniguruma 6.9.8 (Unicode 14.0, the Hugging Face `tokenizers` library's regex engine).
  enum class Classes : std::uint8_t { kPythonRegex, kOniguruma };

  explicit Gpt2PreTokenizer(std::string_view text, Classes classes = Classes::kPythonRegex)
      : text_(text), classes_(classes) {}

  // Sets `piece` to the next pre-token; false once the text is used up.
  bool next(std::string_view& piece) {
    if (pos_ >= text_.size()) return false;
    const std::size_t length = ascii_pretoken_length();
    piece = std::string_view(text_.data() + pos_, length);
    pos_ += length;
    return true;
  }

  // Byte length of the pre-token at the start of a non-empty `text` (the general path).
  static std::size_t pretoken_length(std::string_view text,
                                     Classes classes = Classes::kPythonRegex);

 private:
  // The common all-ASCII cases inline; anything else (a contraction, a non-ASCII byte anywhere
  // in or right after the run) goes to pretoken_length.
  std::size_t ascii_pretoken_length() const {
    using namespace pretokenizer_detail;
    const auto* const begin = reinterpret_cast<const unsigned char*>(text_.data()) + pos_;
    const auto* const end = reinterpret_cast<const unsigned char*>(text_.data()) + text_.size();
    const unsigned char* p = begin;
    if (*p == ' ' && p + 1 < end && kByteClasses[p[1]] != kSpace) ++p;  // " ?" before a run
    const std::uint8_t cls = kByteClasses[*p];
    if (cls == kNonAscii || *begin == '\'') return pretoken_length(text_.substr(pos_), classes_);
    const unsigned char* q = p + 1;
    while (q < end && kByteClasses[*q] == cls) ++q;
    if (q < end && kByteClasses[*q] == kNonAscii) {
      return pretoken_length(text_.substr(pos_), classes_);
    }
    if (cls == kSpace && q < end && q - p >= 2) --q;  // a space run gives back its last char
    return static_cast<std::size_t>(q - begin);
  }

  std::string_view text_;
  Classes classes_;
  std::size_t pos_ = 0;
};

}  // namespace mds::text
