#include "tasks/python_text.h"

#include <cmath>
#include <cstdio>

namespace mds::tasks {

bool is_python_space(char32_t c) {
  if (c <= 0x20) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

char32_t next_code_point(std::string_view s, std::size_t& pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(pos);
  std::size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (pos + length > s.size()) length = 1;  // not valid UTF-8: take the byte alone
  char32_t c = length == 1 ? lead : lead & (0x7F >> length);
  for (std::size_t i = 1; i < length; ++i) c = (c << 6) | (byte(pos + i) & 0x3F);
  pos += length;
  return c;
}

char32_t previous_code_point(std::string_view s, std::size_t& end) {
  std::size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) {
    --start;
  }
  std::size_t pos = start;
  const char32_t c = next_code_point(s, pos);
  end = start;
  return c;
}

std::string_view python_strip(std::string_view s) {
  std::size_t begin = 0;
  while (begin < s.size()) {
    std::size_t next = begin;
    if (!is_python_space(next_code_point(s, next))) break;
    begin = next;
  }
  std::size_t end = s.size();
  while (end > begin) {
    std::size_t previous = end;
    if (!is_python_space(previous_code_point(s, previous))) break;
    end = previous;
  }
  return s.substr(begin, end - begin);
}

std::vector<std::string_view> python_split(std::string_view s) {
  std::vector<std::string_view> words;
  std::size_t pos = 0, word_start = 0;
  bool in_word = false;
  while (pos < s.size()) {
    const std::size_t at = pos;
    const bool space = is_python_space(next_code_point(s, pos));
    if (space && in_word) words.push_back(s.substr(word_start, at - word_start));
    if (!space && !in_word) word_start = at;
    in_word = !space;
  }
  if (in_word) words.push_back(s.substr(word_start));
  return words;
}

std::size_t code_point_count(std::string_view s) {
  std::size_t count = 0;
  for (const char c : s) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

std::string format_e4(double value) {
  if (std::isnan(value)) return "NAN";
  if (std::isinf(value)) return value > 0 ? "INF" : "-INF";
  char text[64];
  std::snprintf(text, sizeof text, "%.4E", value);
  return text;
}

}  // namespace mds::tasks
