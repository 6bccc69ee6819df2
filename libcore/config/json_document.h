// A small strict JSON (RFC 8259) document parser: the whole text becomes a tree of JsonValue, each
// remembering where it starts, so that configuration readers can point at the offending value.
// Errors are one line, "SOURCE:LINE:COLUMN: reason" (columns count bytes from 1).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mds::config {

struct JsonMember;

class JsonValue {
 public:
  enum class Kind : std::uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Where the value's first character is (1-based line, 1-based byte column).
  std::uint32_t line() const { return line_; }
  std::uint32_t column() const { return column_; }

  // The accessors below assume the matching kind.
  bool as_bool() const { return bool_; }
  // A number written without fraction or exponent ("8", "-0", "18446744073709551615"): callers
  // that want an integer tell "8.0" (a number) from an integer that is merely too large.
  bool is_integral_literal() const { return integral_literal_; }
  // An integral literal that fits in int64; as_int64() is then exact.
  bool is_int64() const { return is_int64_; }
  std::int64_t as_int64() const { return int64_; }
  double as_double() const { return double_; }              // every number, rounded to nearest
  const std::string& as_string() const { return string_; }  // UTF-8, escapes decoded
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<JsonMember>& members() const { return members_; }  // in document order

  // The member named `key` (the last, if duplicates were allowed), or nullptr.
  const JsonValue* find(std::string_view key) const;

 private:
  friend class JsonParser;

  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  bool integral_literal_ = false;
  bool is_int64_ = false;
  std::uint32_t line_ = 0;
  std::uint32_t column_ = 0;
  std::int64_t int64_ = 0;
  double double_ = 0.0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<JsonMember> members_;
};

struct JsonMember {
  std::string key;
  std::uint32_t line = 0;  // of the key's opening quote
  std::uint32_t column = 0;
  JsonValue value;
};

// `text` as a JSON string literal: quotes, backslashes and control characters escaped, other
// bytes (UTF-8 included) as they are.
std::string json_quote(std::string_view text);

// "an integer", "a number", "a string", ... for messages like "'x' must be a string, got null".
std::string_view json_kind_name(const JsonValue& value);

struct JsonOptions {
  // Python's json.load keeps the last of repeated keys; DeepSpeed's loader refuses them.
  bool allow_duplicate_keys = false;
  // Python's json.load keeps a lone \uD800-style escape; it is stored as its 3-byte generalized
  // UTF-8 form (ED A0 80), which only callers asking for it must be ready to decode.
  bool allow_lone_surrogates = false;
  // Containers nest at most this deep, so that neither parsing nor destroying the tree (both
  // recursive) can exhaust the stack.
  std::size_t max_depth = 512;
};

// Parses one JSON text (surrounding whitespace allowed, nothing else after it). `source` names the
// text in errors: "ds_config.json:3:7: invalid JSON: expected ',' or '}'". A duplicate key names
// its dotted path: "ds_config.json:1:40: duplicate key 'fp16.enabled'".
JsonValue parse_json(std::string_view text, const std::string& source,
                     const JsonOptions& options = {});

// Like parse_json, but when the top-level value is an object its members are handed to `visit` one
// at a time, in document order, instead of being stored (the result then has no members). For
// large flat files such as GPT-2's vocab.json (50k keys), where a stored tree would double the
// load time; duplicate keys are still checked unless allowed.
JsonValue parse_json(std::string_view text, const std::string& source, const JsonOptions& options,
                     const std::function<void(const JsonMember&)>& visit);

}  // namespace mds::config
