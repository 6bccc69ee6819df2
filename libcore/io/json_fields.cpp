// A single-pass JSON validator that decodes only the requested top-level string fields. What it
// accepts mirrors CPython's C scanner (Modules/_json.c, strict mode) rule by rule, because
// upstream aborts the whole run on any line json.loads rejects: the comments name the rule each
// check reproduces.
#include "io/json_fields.h"

#include <array>
#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "io/byte_scan.h"

namespace mds::io {
namespace {

using Byte = unsigned char;

// Python's int() refuses to convert decimal literals longer than this (sys.int_info
// .default_max_str_digits, CPython 3.11 and the 3.7-3.10 security releases), so json.loads fails
// on such integers; floats have no limit.
constexpr std::size_t kMaxIntegerDigits = 4300;

bool is_whitespace(Byte c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(Byte c) {
  return c >= '0' && c <= '9';
}

// Hex digit values; kNotHex marks other bytes. A table rather than comparisons: the digits of
// \uXXXX escapes are random, so range tests mispredict, and text dumped with ensure_ascii (most
// non-Latin corpora) is mostly such escapes.
constexpr std::uint32_t kNotHex = 0x10000;
constexpr std::array<std::uint32_t, 256> kHexValues = [] {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t& value : table) value = kNotHex;
  for (int c = 0; c < 10; ++c) table['0' + c] = static_cast<std::uint32_t>(c);
  for (int c = 0; c < 6; ++c) {
    table['a' + c] = static_cast<std::uint32_t>(10 + c);
    table['A' + c] = static_cast<std::uint32_t>(10 + c);
  }
  return table;
}();

// The four hex digits at p (the caller checked p + 4 <= end), or a value >= kNotHex.
std::uint32_t hex4(const Byte* p) {
  return kHexValues[p[0]] << 12 | kHexValues[p[1]] << 8 | kHexValues[p[2]] << 4 | kHexValues[p[3]];
}

// What each one-character escape stands for; 0 for the characters that cannot follow a backslash.
constexpr std::array<char, 256> kSimpleEscapes = [] {
  std::array<char, 256> table{};
  table['"'] = '"';
  table['\\'] = '\\';
  table['/'] = '/';
  table['b'] = '\b';
  table['f'] = '\f';
  table['n'] = '\n';
  table['r'] = '\r';
  table['t'] = '\t';
  return table;
}();

// UTF-8 of a code point below 0x110000 into out[0..3]; surrogates get the 3-byte form. Returns the
// length.
std::size_t encode_utf8(char32_t cp, char* out) {
  if (cp < 0x80) {
    out[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cp >> 6));
    out[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (cp >> 12));
    out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (cp >> 18));
  out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return 4;
}

const char* describe(Byte first) {
  switch (first) {
    case '"':
      return "a string";
    case '{':
      return "an object";
    case '[':
      return "an array";
    case 't':
    case 'f':
      return "a boolean";
    case 'n':
      return "null";
    default:
      return "a number";
  }
}

}  // namespace

class JsonFieldExtractor::Parser {
 public:
  Parser(std::string_view json, std::vector<unsigned char>& stack)
      : begin_(reinterpret_cast<const Byte*>(json.data())),
        end_(begin_ + json.size()),
        stack_(stack) {}

  // First problem found, as "invalid JSON: <what> at byte <offset>".
  std::string error() const {
    return base::cat("invalid JSON: ", error_what_, " at byte ", error_at_ - begin_);
  }

  const Byte* begin() const { return begin_; }
  const Byte* end() const { return end_; }

  std::nullptr_t fail(const char* what, const Byte* at) {
    error_what_ = what;
    error_at_ = at;
    return nullptr;
  }

  const Byte* skip_whitespace(const Byte* p) const {
    while (p < end_ && is_whitespace(*p)) ++p;
    return p;
  }

  // Scans the string whose opening quote is at p - 1, checking every rule of scanstring_unicode,
  // and returns the position after its closing quote. kDecode: also append the decoded text to
  // *out (unpaired surrogate escapes appended as WTF-8, and the first recorded in *lone).
  template <bool kDecode>
  const Byte* scan_string(const Byte* p, std::string* out, char32_t* lone) {
    const Byte* const quote = p - 1;
    // Decoded escapes collect here and join the output in one append: per-byte push_back was the
    // bottleneck on escape-heavy text.
    char pending[64];
    std::size_t pending_size = 0;
    while (true) {
      const Byte* special = p < end_ && *p == '\\' ? p : scan::find_string_special(p, end_);
      if constexpr (kDecode) {
        if (special != p) {
          out->append(pending, pending_size);
          pending_size = 0;
          out->append(reinterpret_cast<const char*>(p), special - p);
        }
      }
      if (special == end_) return fail("unterminated string starting", quote);
      if (*special == '"') {
        if constexpr (kDecode) out->append(pending, pending_size);
        return special + 1;
      }
      if (*special < 0x20) return fail("invalid control character", special);
      // A backslash.
      p = special + 1;
      if (p == end_) return fail("unterminated string starting", quote);
      if (*p == 'u') {
        char32_t code_point = 0;
        p = unicode_escape(special, code_point);
        if (p == nullptr) return nullptr;
        if constexpr (kDecode) {
          if (code_point >= 0xD800 && code_point <= 0xDFFF && *lone == 0) *lone = code_point;
          pending_size += encode_utf8(code_point, pending + pending_size);
        }
      } else {
        const char decoded = kSimpleEscapes[*p];
        if (decoded == 0) return fail("invalid \\escape", special);
        if constexpr (kDecode) pending[pending_size++] = decoded;
        ++p;
      }
      if constexpr (kDecode) {
        if (pending_size > sizeof(pending) - 4) {
          out->append(pending, pending_size);
          pending_size = 0;
        }
      }
    }
  }

  // Skips one value of any type starting at p; `depth` containers already enclose it. Iterative,
  // with the open containers on stack_, so hostile nesting costs heap, not call stack.
  const Byte* skip_value(const Byte* p, std::size_t depth) {
    stack_.clear();
    while (true) {
      // Here a value is expected at p.
      if (p == end_) return fail("expecting value", p);
      switch (*p) {
        case '"':
          p = scan_string<false>(p + 1, nullptr, nullptr);
          if (p == nullptr) return nullptr;
          break;
        case '{':
        case '[': {
          if (depth + stack_.size() + 1 > kMaxDepth) {
            return fail("containers nested too deeply (Python raises RecursionError)", p);
          }
          const Byte open = *p;
          stack_.push_back(open);
          p = skip_whitespace(p + 1);
          const Byte close = open == '{' ? '}' : ']';
          if (p < end_ && *p == close) {
            stack_.pop_back();
            ++p;
            break;
          }
          if (open == '[') continue;
          p = skip_member_name(p);
          if (p == nullptr) return nullptr;
          continue;
        }
        default:
          p = skip_scalar(p);
          if (p == nullptr) return nullptr;
          break;
      }
      // A value ended: close containers or move to their next element.
      while (!stack_.empty()) {
        p = skip_whitespace(p);
        const Byte close = stack_.back() == '{' ? '}' : ']';
        if (p < end_ && *p == close) {
          stack_.pop_back();
          ++p;
          continue;
        }
        if (p == end_ || *p != ',') return fail("expecting ',' delimiter", p);
        p = skip_whitespace(p + 1);
        if (stack_.back() == '{') {
          p = skip_member_name(p);
          if (p == nullptr) return nullptr;
        }
        break;
      }
      if (stack_.empty()) return p;
    }
  }

  // Checks `"name" :` at p and returns the position of the value after it.
  const Byte* skip_member_name(const Byte* p) {
    if (p == end_ || *p != '"') {
      return fail("expecting property name enclosed in double quotes", p);
    }
    p = scan_string<false>(p + 1, nullptr, nullptr);
    if (p == nullptr) return nullptr;
    return expect_colon(p);
  }

  const Byte* expect_colon(const Byte* p) {
    p = skip_whitespace(p);
    if (p == end_ || *p != ':') return fail("expecting ':' delimiter", p);
    return skip_whitespace(p + 1);
  }

 private:
  // The \uXXXX escape whose backslash is at `backslash`, and its low half when it starts a
  // surrogate pair. Like _json.c, a high surrogate followed by another \u escape that is not a low
  // surrogate stays alone and the second escape is read on its own.
  const Byte* unicode_escape(const Byte* backslash, char32_t& code_point) {
    const Byte* p = backslash + 2;
    if (end_ - p < 4) return fail("invalid \\uXXXX escape", backslash);
    const std::uint32_t unit = hex4(p);
    if (unit >= kNotHex) return fail("invalid \\uXXXX escape", backslash);
    p += 4;
    code_point = unit;
    if (unit >= 0xD800 && unit <= 0xDBFF && end_ - p >= 2 && p[0] == '\\' && p[1] == 'u') {
      // _json.c commits to reading these four digits, so bad ones fail even here.
      if (end_ - p < 6) return fail("invalid \\uXXXX escape", p);
      const std::uint32_t low = hex4(p + 2);
      if (low >= kNotHex) return fail("invalid \\uXXXX escape", p);
      if (low >= 0xDC00 && low <= 0xDFFF) {
        code_point = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
        p += 6;
      }
    }
    return p;
  }

  // null, true, false, NaN, Infinity, -Infinity or a number.
  const Byte* skip_scalar(const Byte* p) {
    switch (*p) {
      case 'n':
        return literal(p, "null");
      case 't':
        return literal(p, "true");
      case 'f':
        return literal(p, "false");
      case 'N':
        return literal(p, "NaN");
      case 'I':
        return literal(p, "Infinity");
      case '-':
        if (p + 1 < end_ && p[1] == 'I') return literal(p, "-Infinity");
        return number(p);
      default:
        return number(p);
    }
  }

  const Byte* literal(const Byte* p, const char* word) {
    const std::size_t size = std::strlen(word);
    if (static_cast<std::size_t>(end_ - p) < size || std::memcmp(p, word, size) != 0) {
      return fail("expecting value", p);
    }
    return p + size;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? as _match_number_unicode reads it: a fraction
  // or exponent without digits is left unread, and then fails as whatever follows the number.
  const Byte* number(const Byte* start) {
    const Byte* p = start;
    if (*p == '-') ++p;
    const Byte* digits = p;
    if (p < end_ && *p >= '1' && *p <= '9') {
      while (p < end_ && is_digit(*p)) ++p;
    } else if (p < end_ && *p == '0') {
      ++p;
    } else {
      return fail("expecting value", start);
    }
    const std::size_t integer_digits = static_cast<std::size_t>(p - digits);
    bool is_float = false;
    if (end_ - p >= 2 && *p == '.' && is_digit(p[1])) {
      p += 2;
      while (p < end_ && is_digit(*p)) ++p;
      is_float = true;
    }
    if (p < end_ && (*p == 'e' || *p == 'E')) {
      const Byte* q = p + 1;
      if (q < end_ && (*q == '+' || *q == '-')) ++q;
      const Byte* exponent = q;
      while (q < end_ && is_digit(*q)) ++q;
      if (q > exponent) {
        p = q;
        is_float = true;
      }
    }
    if (!is_float && integer_digits > kMaxIntegerDigits) {
      return fail("integer with more than 4300 digits (Python's int() limit)", start);
    }
    return p;
  }

  const Byte* begin_;
  const Byte* end_;
  std::vector<unsigned char>& stack_;
  const char* error_what_ = "";
  const Byte* error_at_ = nullptr;
};

JsonFieldExtractor::JsonFieldExtractor(std::vector<std::string> keys) : keys_(std::move(keys)) {
  first_index_.resize(keys_.size());
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    first_index_[i] = i;
    for (std::size_t j = 0; j < i; ++j) {
      if (keys_[j] == keys_[i]) {
        first_index_[i] = j;
        break;
      }
    }
  }
  fields_.resize(keys_.size());
}

std::optional<std::string> JsonFieldExtractor::extract(std::string_view json,
                                                       std::vector<std::string>& values) {
  Parser parser(json, stack_);
  values.resize(keys_.size());
  for (Field& field : fields_) field = Field{};

  const Byte* p = parser.begin();
  const Byte* const end = parser.end();
  // json.loads checks for a BOM before skipping whitespace.
  if (json.size() >= 3 && std::memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
    return "invalid JSON: unexpected UTF-8 BOM at byte 0";
  }
  p = parser.skip_whitespace(p);
  if (p == end) {
    parser.fail("expecting value", p);
    return parser.error();
  }
  if (*p != '{') {
    // Upstream's obj[key] then fails on any other type, but a syntax error is reported first.
    const Byte first = *p;
    p = parser.skip_value(p, 0);
    if (p == nullptr) return parser.error();
    p = parser.skip_whitespace(p);
    if (p != end) {
      parser.fail("extra data", p);
      return parser.error();
    }
    return base::cat("not a JSON object but ", describe(first));
  }

  p = parser.skip_whitespace(p + 1);
  if (p < end && *p == '}') {
    ++p;
  } else {
    while (true) {
      if (p == end || *p != '"') {
        parser.fail("expecting property name enclosed in double quotes", p);
        return parser.error();
      }
      // Keys compare after unescaping; the common escape-free key is compared in place.
      const Byte* name = p + 1;
      const Byte* special = scan::find_string_special(name, end);
      std::string_view key;
      bool key_usable = true;
      if (special < end && *special == '"') {
        key = {reinterpret_cast<const char*>(name), static_cast<std::size_t>(special - name)};
        p = special + 1;
      } else {
        key_scratch_.clear();
        char32_t lone = 0;
        p = parser.scan_string<true>(name, &key_scratch_, &lone);
        if (p == nullptr) return parser.error();
        key = key_scratch_;
        key_usable = lone == 0;  // no requested key can contain a surrogate
      }
      std::size_t match = keys_.size();
      if (key_usable) {
        for (std::size_t i = 0; i < keys_.size(); ++i) {
          if (first_index_[i] == i && keys_[i] == key) {
            match = i;
            break;
          }
        }
      }
      p = parser.expect_colon(p);
      if (p == nullptr) return parser.error();
      if (match == keys_.size()) {
        p = parser.skip_value(p, 1);
        if (p == nullptr) return parser.error();
      } else if (p < end && *p == '"') {
        // Duplicate keys: the last occurrence wins, whatever the earlier ones held.
        Field& field = fields_[match];
        field = Field{Kind::kString, 0};
        values[match].clear();
        p = parser.scan_string<true>(p + 1, &values[match], &field.lone_surrogate);
        if (p == nullptr) return parser.error();
      } else {
        const Byte first = p < end ? *p : 0;
        p = parser.skip_value(p, 1);
        if (p == nullptr) return parser.error();
        fields_[match] = Field{first == '{'                   ? Kind::kObject
                               : first == '['                 ? Kind::kArray
                               : first == 'n'                 ? Kind::kNull
                               : first == 't' || first == 'f' ? Kind::kBoolean
                                                              : Kind::kNumber,
                               0};
      }
      p = parser.skip_whitespace(p);
      if (p < end && *p == '}') {
        ++p;
        break;
      }
      if (p == end || *p != ',') {
        parser.fail("expecting ',' delimiter", p);
        return parser.error();
      }
      p = parser.skip_whitespace(p + 1);
    }
  }
  p = parser.skip_whitespace(p);
  if (p != end) {
    parser.fail("extra data", p);
    return parser.error();
  }

  for (std::size_t i = 0; i < keys_.size(); ++i) {
    const std::size_t first = first_index_[i];
    const Field& field = fields_[first];
    switch (field.kind) {
      case Kind::kMissing:
        return base::cat("no key '", keys_[i], "'");
      case Kind::kString:
        break;
      case Kind::kNumber:
        return base::cat("key '", keys_[i], "' is a number, not a string");
      case Kind::kBoolean:
        return base::cat("key '", keys_[i], "' is a boolean, not a string");
      case Kind::kNull:
        return base::cat("key '", keys_[i], "' is null, not a string");
      case Kind::kObject:
        return base::cat("key '", keys_[i], "' is an object, not a string");
      case Kind::kArray:
        return base::cat("key '", keys_[i], "' is an array, not a string");
    }
    if (field.lone_surrogate != 0) {
      static constexpr char kHex[] = "0123456789abcdef";
      std::string escape = "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) {
        escape.push_back(kHex[(field.lone_surrogate >> shift) & 0xF]);
      }
      return base::cat("key '", keys_[i], "' has a lone surrogate ", escape,
                       " that cannot be encoded as UTF-8");
    }
    if (first != i) values[i] = values[first];
  }
  return std::nullopt;
}

}  // namespace mds::io
