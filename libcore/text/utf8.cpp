#include "text/utf8.h"

#include <cstdint>
#include <cstring>

namespace mds::text {
namespace {

// Length of the valid sequence starting at `p` (1-4), or 0 when Python's decoder rejects it.
std::size_t valid_sequence_length(const unsigned char* p, const unsigned char* end) {
  const unsigned char lead = p[0];
  const std::size_t left = static_cast<std::size_t>(end - p);
  auto continuation = [&](std::size_t i) { return i < left && (p[i] & 0xC0) == 0x80; };
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // stray continuation byte or overlong 2-byte form
  if (lead < 0xE0) return continuation(1) ? 2 : 0;
  if (lead < 0xF0) {
    if (left < 2) return 0;
    const unsigned char second = p[1];
    if (lead == 0xE0 && second < 0xA0) return 0;   // overlong
    if (lead == 0xED && second >= 0xA0) return 0;  // UTF-16 surrogate
    return continuation(1) && continuation(2) ? 3 : 0;
  }
  if (lead < 0xF5) {
    if (left < 2) return 0;
    const unsigned char second = p[1];
    if (lead == 0xF0 && second < 0x90) return 0;   // overlong
    if (lead == 0xF4 && second >= 0x90) return 0;  // above U+10FFFF
    return continuation(1) && continuation(2) && continuation(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::optional<std::size_t> find_invalid_utf8(std::string_view bytes) {
  const auto* begin = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* end = begin + bytes.size();
  const unsigned char* p = begin;
  while (p < end) {
    // ASCII fast path, eight bytes at a time.
    while (end - p >= 8) {
      std::uint64_t word;
      std::memcpy(&word, p, 8);
      if ((word & 0x8080808080808080ull) != 0) break;
      p += 8;
    }
    if (p == end) break;
    const std::size_t length = valid_sequence_length(p, end);
    if (length == 0) return static_cast<std::size_t>(p - begin);
    p += length;
  }
  return std::nullopt;
}

DecodedChar decode_char_at(std::string_view text, std::size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const auto* end = reinterpret_cast<const unsigned char*>(text.data()) + text.size();
  const std::size_t length = valid_sequence_length(p, end);
  switch (length) {
    case 1:
      return {p[0], 1};
    case 2:
      return {(char32_t{p[0] & 0x1Fu} << 6) | (p[1] & 0x3Fu), 2};
    case 3:
      return {(char32_t{p[0] & 0x0Fu} << 12) | (char32_t{p[1] & 0x3Fu} << 6) | (p[2] & 0x3Fu), 3};
    case 4:
      return {(char32_t{p[0] & 0x07u} << 18) | (char32_t{p[1] & 0x3Fu} << 12) |
                  (char32_t{p[2] & 0x3Fu} << 6) | (p[3] & 0x3Fu),
              4};
    default:
      return {U'\uFFFD', 1};
  }
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace mds::text
