#include "base/python_int.h"

#include <cctype>
#include <limits>

namespace mds::base {

std::optional<std::int64_t> python_int(const std::string& text) {
  std::size_t i = 0;
  std::size_t end = text.size();
  while (i < end && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  while (end > i && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  bool negative = false;
  if (i < end && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  if (i == end) return std::nullopt;
  std::int64_t value = 0;
  bool previous_digit = false;
  for (; i < end; ++i) {
    const char ch = text[i];
    if (ch == '_') {
      if (!previous_digit || i + 1 == end) return std::nullopt;
      previous_digit = false;
      continue;
    }
    if (ch < '0' || ch > '9') return std::nullopt;
    if (value > (std::numeric_limits<std::int64_t>::max() - (ch - '0')) / 10) return std::nullopt;
    value = value * 10 + (ch - '0');
    previous_digit = true;
  }
  return negative ? -value : value;
}

}  // namespace mds::base
