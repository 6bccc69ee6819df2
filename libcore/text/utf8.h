#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mds::text {

// Offset of the first byte that Python's strict UTF-8 decoder rejects (overlong forms, surrogates,
// code points above U+10FFFF, truncated sequences), or nullopt when `bytes` is valid UTF-8.
std::optional<std::size_t> find_invalid_utf8(std::string_view bytes);

// Appends the UTF-8 encoding of a Unicode scalar value.
void append_utf8(std::string& out, char32_t code_point);

// The character starting at `pos` of a non-empty remainder: its code point and byte length. A byte
// Python's strict decoder would reject there counts as a one-byte U+FFFD.
struct DecodedChar {
  char32_t code_point;
  std::uint32_t length;
};
DecodedChar decode_char_at(std::string_view text, std::size_t pos);

}  // namespace mds::text
