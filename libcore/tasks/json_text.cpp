#include "tasks/json_text.h"

#include <cmath>
#include <cstdio>

#include "base/python_float.h"
#include "tasks/python_text.h"

namespace mds::tasks {

namespace {

void append_escape(std::string& out, unsigned unit) {
  char text[16];
  std::snprintf(text, sizeof text, "\\u%04x", unit & 0xFFFFu);
  out += text;
}

}  // namespace

std::string json_string(std::string_view s) {
  std::string out = "\"";
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = next_code_point(s, pos);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c >= 0x20 && c <= 0x7E) {
      out += static_cast<char>(c);
    } else if (c > 0xFFFF) {
      const char32_t v = c - 0x10000;
      append_escape(out, 0xD800 + static_cast<unsigned>(v >> 10));
      append_escape(out, 0xDC00 + static_cast<unsigned>(v & 0x3FF));
    } else {
      append_escape(out, static_cast<unsigned>(c));
    }
  }
  out += '"';
  return out;
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  return base::python_float_repr(value);
}

}  // namespace mds::tasks
