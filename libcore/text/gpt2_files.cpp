#include "text/gpt2_files.h"

#include <cstddef>
#include <filesystem>
#include <limits>
#include <system_error>

#include "base/error.h"
#include "base/mapped_file.h"
#include "text/utf8.h"

namespace mds::text {
namespace {

// Decodes one code point of text already checked to be valid UTF-8.
char32_t decode_valid_utf8(std::string_view text, std::size_t& pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const unsigned char lead = byte(0);
  char32_t cp;
  std::size_t length;
  if (lead < 0x80) {
    cp = lead;
    length = 1;
  } else if (lead < 0xE0) {
    cp = lead & 0x1Fu;
    length = 2;
  } else if (lead < 0xF0) {
    cp = lead & 0x0Fu;
    length = 3;
  } else {
    cp = lead & 0x07u;
    length = 4;
  }
  for (std::size_t i = 1; i < length; ++i) cp = (cp << 6) | (byte(i) & 0x3Fu);
  pos += length;
  return cp;
}

void check_utf8(std::string_view text, const char* what, const std::string& path) {
  if (const auto bad = find_invalid_utf8(text)) {
    base::fail(what, " ", path, ": invalid UTF-8 at byte offset ", *bad);
  }
}

std::string read_whole_file(const char* what, const std::string& path) {
  std::error_code code;
  if (std::filesystem::is_directory(path, code)) base::fail(what, " ", path, ": is a directory");
  try {
    const base::MappedFile file(path);
    return std::string(file.bytes());
  } catch (const base::Error& error) {
    base::fail(what, ": ", error.what());
  }
}

// A strict reader of the one JSON shape vocab.json has: {"string": integer, ...}.
class VocabJsonParser {
 public:
  VocabJsonParser(std::string_view json, const std::string& path) : json_(json), path_(path) {}

  std::vector<Gpt2VocabEntry> parse() {
    std::vector<Gpt2VocabEntry> entries;
    skip_space();
    expect('{', "'{' (the vocab must be a JSON object)");
    skip_space();
    if (peek() == '}') {
      ++pos_;
    } else {
      for (;;) {
        skip_space();
        Gpt2VocabEntry entry;
        entry.token = parse_string();
        skip_space();
        expect(':', "':'");
        skip_space();
        entry.id = parse_id();
        entries.push_back(std::move(entry));
        skip_space();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect('}', "',' or '}'");
        break;
      }
    }
    skip_space();
    if (pos_ != json_.size()) error("unexpected text after the JSON object");
    return entries;
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    std::size_t line = 1;
    std::size_t column = 1;
    for (std::size_t i = 0; i < pos_ && i < json_.size(); ++i) {
      if (json_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    base::fail("gpt2 vocab file ", path_, " line ", line, " column ", column,
               ": invalid JSON: ", what);
  }

  int peek() const { return pos_ < json_.size() ? static_cast<unsigned char>(json_[pos_]) : -1; }

  void expect(char c, std::string_view what) {
    if (peek() != static_cast<unsigned char>(c)) error(base::cat("expected ", what));
    ++pos_;
  }

  void skip_space() {
    while (pos_ < json_.size()) {
      const char c = json_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  unsigned hex4() {
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      const int c = peek();
      unsigned digit;
      if (c >= '0' && c <= '9') {
        digit = static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<unsigned>(c - 'A' + 10);
      } else {
        error("bad \\u escape (expected 4 hex digits)");
      }
      value = value * 16 + digit;
      ++pos_;
    }
    return value;
  }

  std::u32string parse_string() {
    expect('"', "'\"' (keys must be strings)");
    std::u32string out;
    for (;;) {
      const int c = peek();
      if (c < 0) error("unterminated string");
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) error("control character inside a string");
      if (c != '\\') {
        out.push_back(decode_valid_utf8(json_, pos_));
        continue;
      }
      ++pos_;
      const int escape = peek();
      ++pos_;
      switch (escape) {
        case '"':
          out.push_back(U'"');
          break;
        case '\\':
          out.push_back(U'\\');
          break;
        case '/':
          out.push_back(U'/');
          break;
        case 'b':
          out.push_back(U'\b');
          break;
        case 'f':
          out.push_back(U'\f');
          break;
        case 'n':
          out.push_back(U'\n');
          break;
        case 'r':
          out.push_back(U'\r');
          break;
        case 't':
          out.push_back(U'\t');
          break;
        case 'u': {
          char32_t cp = hex4();
          // Python joins a high surrogate with a following \u low surrogate; alone, each is kept.
          if (cp >= 0xD800 && cp <= 0xDBFF && json_.substr(pos_, 2) == "\\u") {
            const std::size_t saved = pos_;
            pos_ += 2;
            const char32_t low = hex4();
            if (low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              pos_ = saved;
            }
          }
          out.push_back(cp);
          break;
        }
        default:
          pos_ -= 2;
          error("invalid escape in a string");
      }
    }
  }

  std::int32_t parse_id() {
    const std::size_t start = pos_;
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (peek() < '0' || peek() > '9') error("expected an integer id");
    if (peek() == '0' && pos_ + 1 < json_.size() && json_[pos_ + 1] >= '0' &&
        json_[pos_ + 1] <= '9') {
      error("leading zero in a number");
    }
    std::int64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + (peek() - '0');
      if (value > std::numeric_limits<std::int32_t>::max()) {
        pos_ = start;
        error("id does not fit in 31 bits");
      }
      ++pos_;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') error("ids must be integers");
    if (negative && value != 0) {
      pos_ = start;
      error("ids must not be negative");
    }
    return static_cast<std::int32_t>(value);
  }

  std::string_view json_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

// Python's str.isspace(), which str.split() splits on.
bool python_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

}  // namespace

std::vector<Gpt2VocabEntry> parse_gpt2_vocab(std::string_view json, const std::string& path) {
  check_utf8(json, "gpt2 vocab file", path);
  if (json.substr(0, 3) == "\xEF\xBB\xBF") {
    base::fail("gpt2 vocab file ", path,
               ": starts with a UTF-8 byte order mark (json.load "
               "rejects it)");
  }
  return VocabJsonParser(json, path).parse();
}

std::vector<Gpt2VocabEntry> read_gpt2_vocab(const std::string& path) {
  return parse_gpt2_vocab(read_whole_file("gpt2 vocab file", path), path);
}

std::vector<Gpt2MergeLine> parse_gpt2_merges(std::string_view text, const std::string& path) {
  check_utf8(text, "gpt2 merges file", path);
  std::vector<Gpt2MergeLine> merges;
  std::size_t line_number = 1;
  std::size_t pos = 0;
  // Universal newlines: a line ends at \n, \r\n or a lone \r.
  auto next_line_end = [&](std::size_t from) {
    while (from < text.size() && text[from] != '\n' && text[from] != '\r') ++from;
    return from;
  };
  auto skip_newline = [&](std::size_t at) {
    if (text[at] == '\r' && at + 1 < text.size() && text[at + 1] == '\n') return at + 2;
    return at + 1;
  };
  std::size_t end = next_line_end(pos);
  if (end == text.size()) return merges;  // only a header (or nothing)
  pos = skip_newline(end);
  for (;;) {
    end = next_line_end(pos);
    if (end == text.size()) break;  // the text after the last newline is dropped
    ++line_number;
    std::vector<std::u32string> symbols;
    std::u32string current;
    for (std::size_t i = pos; i < end;) {
      const char32_t c = decode_valid_utf8(text, i);
      if (python_isspace(c)) {
        if (!current.empty()) symbols.push_back(std::move(current));
        current.clear();
      } else {
        current.push_back(c);
      }
    }
    if (!current.empty()) symbols.push_back(std::move(current));
    if (symbols.size() == 2) {
      merges.push_back({std::move(symbols[0]), std::move(symbols[1])});
    } else if (symbols.empty()) {
      merges.emplace_back();
    } else {
      base::fail("gpt2 merges file ", path, " line ", line_number, ": expected two symbols, found ",
                 symbols.size());
    }
    pos = skip_newline(end);
  }
  return merges;
}

std::vector<Gpt2MergeLine> read_gpt2_merges(const std::string& path) {
  return parse_gpt2_merges(read_whole_file("gpt2 merges file", path), path);
}

}  // namespace mds::text
