#include "config/json_document.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

#include "base/error.h"

namespace mds::config {

const JsonValue* JsonValue::find(std::string_view key) const {
  // From the back, so that with allow_duplicate_keys the last one wins, as in a Python dict.
  for (auto it = members_.rbegin(); it != members_.rend(); ++it)
    if (it->key == key) return &it->value;
  return nullptr;
}

std::string_view json_kind_name(const JsonValue& value) {
  switch (value.kind()) {
    case JsonValue::Kind::kNull:
      return "null";
    case JsonValue::Kind::kBool:
      return "a boolean";
    case JsonValue::Kind::kNumber:
      return value.is_integral_literal() ? "an integer" : "a number";
    case JsonValue::Kind::kString:
      return "a string";
    case JsonValue::Kind::kArray:
      return "an array";
    case JsonValue::Kind::kObject:
      return "an object";
  }
  return "a value";
}

// Recursive descent, bounded by options.max_depth. Line and column of values are tracked while
// skipping whitespace (the only place a raw newline may appear); an error recounts them from the
// start, which is slow but happens once.
class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& source, const JsonOptions& options,
             const std::function<void(const JsonMember&)>* visit)
      : text_(text), source_(source), options_(options), visit_(visit) {}

  JsonValue run() {
    JsonValue root;
    skip_ws();
    value(root, 0);
    skip_ws();
    if (pos_ != text_.size()) syntax("extra data after the value");
    return root;
  }

 private:
  // One step of the path to the value being parsed, for naming duplicate keys.
  struct PathStep {
    const std::string* key;  // nullptr inside an array
    std::size_t index;
  };

  [[noreturn]] void fail_at(std::size_t line, std::size_t column, std::string_view reason) const {
    base::fail(source_, ":", line, ":", column, ": ", reason);
  }
  [[noreturn]] void syntax(std::string_view what) const {
    std::size_t line = 1;
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    fail_at(line, pos_ - line_start + 1, base::cat("invalid JSON: ", what));
  }

  int peek() const { return pos_ < text_.size() ? static_cast<unsigned char>(text_[pos_]) : -1; }
  static bool is_digit(int c) { return c >= '0' && c <= '9'; }
  std::uint32_t column() const { return static_cast<std::uint32_t>(pos_ - line_start_ + 1); }

  void skip_ws() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        line_start_ = pos_ + 1;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        break;
      }
      ++pos_;
    }
  }

  void value(JsonValue& out, std::size_t depth) {
    out.line_ = line_;
    out.column_ = column();
    switch (peek()) {
      case '{':
        object(out, depth + 1);
        return;
      case '[':
        array(out, depth + 1);
        return;
      case '"':
        out.kind_ = JsonValue::Kind::kString;
        string(out.string_);
        return;
      case 't':
        literal("true");
        out.kind_ = JsonValue::Kind::kBool;
        out.bool_ = true;
        return;
      case 'f':
        literal("false");
        out.kind_ = JsonValue::Kind::kBool;
        return;
      case 'n':
        literal("null");
        return;
      default:
        if (peek() == '-' || is_digit(peek())) {
          number(out);
          return;
        }
        syntax("expected a value");
    }
  }

  void literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) syntax("expected a value");
    pos_ += word.size();
  }

  void enter(std::size_t depth) const {
    if (depth > options_.max_depth)
      syntax(base::cat("nesting deeper than ", options_.max_depth, " levels"));
  }

  void object(JsonValue& out, std::size_t depth) {
    enter(depth);
    out.kind_ = JsonValue::Kind::kObject;
    ++pos_;
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    // Top-level members are streamed to visit_ through one reused scratch member.
    const bool stream = depth == 1 && visit_ != nullptr;
    for (;;) {
      skip_ws();
      if (peek() != '"') syntax("expected a string key");
      // `member` stays put while its value is parsed: nothing else joins `out` meanwhile.
      JsonMember& member = stream ? scratch_ : out.members_.emplace_back();
      if (stream) {
        member.key.clear();  // keeps its capacity
        member.value = JsonValue();
      }
      member.line = line_;
      member.column = column();
      string(member.key);
      skip_ws();
      if (peek() != ':') syntax("expected ':'");
      ++pos_;
      skip_ws();
      path_.push_back({&member.key, 0});
      value(member.value, depth);
      path_.pop_back();
      if (stream) {
        if (!options_.allow_duplicate_keys && !streamed_keys_.insert(member.key).second)
          duplicate_key(member);
        (*visit_)(member);
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        break;
      }
      syntax("expected ',' or '}'");
    }
    // Checked when the object is complete, as Python's object_pairs_hook (DeepSpeed's duplicate
    // check) sees it: a syntax error later inside the object is reported first.
    if (!stream && !options_.allow_duplicate_keys) check_duplicates(out.members_);
  }

  void check_duplicates(const std::vector<JsonMember>& members) const {
    std::size_t duplicate = 0;  // index of the first repeated key in document order; 0: none
    if (members.size() <= 16) {
      for (std::size_t i = 1; i < members.size() && duplicate == 0; ++i)
        for (std::size_t j = 0; j < i; ++j)
          if (members[j].key == members[i].key) {
            duplicate = i;
            break;
          }
    } else {
      std::unordered_set<std::string_view> seen;
      seen.reserve(members.size());
      for (std::size_t i = 0; i < members.size(); ++i)
        if (!seen.insert(members[i].key).second) {
          duplicate = i;
          break;
        }
    }
    if (duplicate != 0) duplicate_key(members[duplicate]);
  }

  [[noreturn]] void duplicate_key(const JsonMember& member) const {
    std::string path;
    for (const PathStep& step : path_) {
      if (step.key == nullptr) {
        path += base::cat("[", step.index, "]");
      } else {
        if (!path.empty()) path += '.';
        path += *step.key;
      }
    }
    fail_at(member.line, member.column,
            base::cat("duplicate key '", path.empty() ? "" : path + ".", member.key, "'"));
  }

  void array(JsonValue& out, std::size_t depth) {
    enter(depth);
    out.kind_ = JsonValue::Kind::kArray;
    ++pos_;
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_ws();
      path_.push_back({nullptr, out.items_.size()});
      value(out.items_.emplace_back(), depth);
      path_.pop_back();
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return;
      }
      syntax("expected ',' or ']'");
    }
  }

  void digits() {
    if (!is_digit(peek())) syntax("expected a digit");
    while (is_digit(peek())) ++pos_;
  }

  void number(JsonValue& out) {
    const std::size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;  // a leading zero stands alone: "01" is "0" followed by an error
    } else {
      digits();
    }
    bool integral = true;
    if (peek() == '.') {
      integral = false;
      ++pos_;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits();
    }
    out.kind_ = JsonValue::Kind::kNumber;
    out.integral_literal_ = integral;
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      out.is_int64_ = std::from_chars(first, last, out.int64_).ec == std::errc();
      if (out.is_int64_) {
        out.double_ = static_cast<double>(out.int64_);  // rounds to nearest, as parsing would
        return;
      }
    }
    if (std::from_chars(first, last, out.double_).ec != std::errc()) {
      // Out of range: strtod gives what Python gives, +-inf or (+-)0.
      out.double_ = std::strtod(std::string(first, last).c_str(), nullptr);
    }
  }

  // The value of 4 hex digits at `at`, or -1.
  long hex4(std::size_t at) const {
    if (at + 4 > text_.size()) return -1;
    long value = 0;
    for (std::size_t i = at; i < at + 4; ++i) {
      const char c = text_[i];
      int digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return -1;
      }
      value = value * 16 + digit;
    }
    return value;
  }

  static void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  void string(std::string& out) {
    ++pos_;  // opening quote
    for (;;) {
      // Plain ASCII runs are copied in one go: vocab.json is almost all of them.
      const std::size_t start = pos_;
      while (pos_ < text_.size()) {
        const auto c = static_cast<unsigned char>(text_[pos_]);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++pos_;
      }
      out.append(text_.data() + start, pos_ - start);
      const int c = peek();
      if (c < 0) syntax("unterminated string");
      if (c == '"') {
        ++pos_;
        return;
      }
      if (c < 0x20) syntax("control character in string");
      if (c >= 0x80) {
        utf8_sequence(out);
      } else {
        escape(out);
      }
    }
  }

  // Copies one well-formed UTF-8 sequence (RFC 3629: no overlongs, surrogates or > U+10FFFF).
  void utf8_sequence(std::string& out) {
    const auto byte = [&](std::size_t i) {
      return pos_ + i < text_.size() ? static_cast<unsigned char>(text_[pos_ + i]) : 0u;
    };
    const unsigned lead = byte(0);
    std::size_t length = 0;
    unsigned low = 0x80;
    unsigned high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      syntax("invalid UTF-8 in string");
    }
    if (byte(1) < low || byte(1) > high) syntax("invalid UTF-8 in string");
    for (std::size_t i = 2; i < length; ++i)
      if (byte(i) < 0x80 || byte(i) > 0xBF) syntax("invalid UTF-8 in string");
    out.append(text_.data() + pos_, length);
    pos_ += length;
  }

  void escape(std::string& out) {
    ++pos_;  // backslash
    const int e = peek();
    if (e < 0) syntax("unterminated string");
    char decoded = 0;
    switch (e) {
      case '"':
      case '\\':
      case '/':
        decoded = static_cast<char>(e);
        break;
      case 'b':
        decoded = '\b';
        break;
      case 'f':
        decoded = '\f';
        break;
      case 'n':
        decoded = '\n';
        break;
      case 'r':
        decoded = '\r';
        break;
      case 't':
        decoded = '\t';
        break;
      case 'u':
        unicode_escape(out);
        return;
      default:
        syntax("invalid escape");
    }
    out += decoded;
    ++pos_;
  }

  // At the 'u' of \uXXXX. A high surrogate joins a following \u low surrogate, as in Python.
  void unicode_escape(std::string& out) {
    const long first = hex4(pos_ + 1);
    if (first < 0) syntax("invalid \\u escape");
    auto cp = static_cast<char32_t>(first);
    if (cp >= 0xD800 && cp <= 0xDBFF && text_.substr(pos_ + 5, 2) == "\\u") {
      const long second = hex4(pos_ + 7);
      if (second >= 0xDC00 && second <= 0xDFFF) {
        append_utf8(out,
                    0x10000 + ((cp - 0xD800) << 10) + (static_cast<char32_t>(second) - 0xDC00));
        pos_ += 11;
        return;
      }
    }
    if (cp >= 0xD800 && cp <= 0xDFFF && !options_.allow_lone_surrogates)
      syntax("unpaired UTF-16 surrogate in \\u escape");
    append_utf8(out, cp);
    pos_ += 5;
  }

  std::string_view text_;
  const std::string& source_;
  const JsonOptions& options_;
  const std::function<void(const JsonMember&)>* visit_;
  std::size_t pos_ = 0;
  std::uint32_t line_ = 1;
  std::size_t line_start_ = 0;
  std::vector<PathStep> path_;
  JsonMember scratch_;
  std::unordered_set<std::string> streamed_keys_;
};

JsonValue parse_json(std::string_view text, const std::string& source, const JsonOptions& options) {
  return JsonParser(text, source, options, nullptr).run();
}

JsonValue parse_json(std::string_view text, const std::string& source, const JsonOptions& options,
                     const std::function<void(const JsonMember&)>& visit) {
  return JsonParser(text, source, options, &visit).run();
}

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace mds::config
