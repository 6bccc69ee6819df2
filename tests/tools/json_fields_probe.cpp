// Runs JsonFieldExtractor over documents given one per line in hex (so that any byte, newlines
// included, can be tested) and prints one line per document: `OK ["value", ...]` with the values
// JSON-escaped, or `ERROR <reason>`. Arguments: the keys to extract. tests/e2e/json_oracle_test.py
// compares the output with Python's json.loads.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "io/json_fields.h"
#include "text/utf8.h"

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool decode_hex(const std::string& hex, std::string& out) {
  out.clear();
  if (hex.size() % 2 != 0) return false;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int high = hex_digit(hex[i]);
    const int low = hex_digit(hex[i + 1]);
    if (high < 0 || low < 0) return false;
    out.push_back(static_cast<char>(high << 4 | low));
  }
  return true;
}

// JSON string literal; non-ASCII bytes are copied, so invalid UTF-8 shows up on the Python side.
void append_json_string(std::string& out, const std::string& value) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (byte < 0x20) {
      out += "\\u00";
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> keys(argv + 1, argv + argc);
  mds::io::JsonFieldExtractor extractor(keys);
  std::vector<std::string> values;
  std::string hex;
  std::string document;
  std::string out;
  std::ios::sync_with_stdio(false);
  while (std::getline(std::cin, hex)) {
    if (!decode_hex(hex, document)) {
      std::cerr << "json_fields_probe: input line is not hex\n";
      return 2;
    }
    out.clear();
    // preprocess checks UTF-8 before parsing, as Python decodes the file before json.loads.
    if (const auto bad = mds::text::find_invalid_utf8(document)) {
      out = "ERROR invalid UTF-8 at byte " + std::to_string(*bad);
    } else if (const auto error = extractor.extract(document, values)) {
      out = "ERROR " + *error;
    } else {
      out = "OK [";
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (i > 0) out += ", ";
        append_json_string(out, values[i]);
      }
      out += "]";
    }
    out.push_back('\n');
    std::cout << out;
  }
  std::cout.flush();
  return std::cout ? 0 : 1;
}
