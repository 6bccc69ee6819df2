#include "text/utf8_lossy.h"

#include <cstddef>

namespace mds::text {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Valid range of the second byte after `lead` (the later ones are always 80..BF).
void second_byte_range(unsigned char lead, unsigned char& low, unsigned char& high) {
  low = 0x80;
  high = 0xBF;
  if (lead == 0xE0) low = 0xA0;   // no overlong 3-byte forms
  if (lead == 0xED) high = 0x9F;  // no surrogates
  if (lead == 0xF0) low = 0x90;   // no overlong 4-byte forms
  if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
}

}  // namespace

std::string decode_utf8_replace(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t size = bytes.size();
  std::size_t i = 0;
  while (i < size) {
    const unsigned char lead = p[i];
    if (lead < 0x80) {
      out.push_back(static_cast<char>(lead));
      ++i;
      continue;
    }
    std::size_t length = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
    }
    // How many bytes of a valid sequence are present: the lead plus matching continuations.
    std::size_t valid = length == 0 ? 0 : 1;
    if (length > 0) {
      unsigned char low;
      unsigned char high;
      second_byte_range(lead, low, high);
      while (valid < length && i + valid < size) {
        const unsigned char c = p[i + valid];
        if (valid == 1 ? (c < low || c > high) : (c & 0xC0) != 0x80) break;
        ++valid;
      }
    }
    if (length > 0 && valid == length) {
      out.append(bytes.substr(i, length));
      i += length;
    } else {
      out.append(kReplacement);
      i += valid > 0 ? valid : 1;
    }
  }
  return out;
}

}  // namespace mds::text
