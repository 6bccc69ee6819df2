#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mds::io {

// Extracts string fields from one JSON document, accepting exactly what Python's json.loads
// accepts (NaN/Infinity, any value at top level, duplicate keys with the last one winning, escaped
// key names compared after unescaping, raw control characters in strings rejected, trailing
// data rejected) and producing what upstream then tokenizes (\uD83D\uDE00 pairs combined).
class JsonFieldExtractor {
 public:
  explicit JsonFieldExtractor(std::vector<std::string> keys);

  // On success returns nullopt and sets values[i] to the UTF-8 value of keys[i]. On failure
  // returns a one-line reason, e.g. "invalid JSON: expecting ',' or '}' at byte 17",
  // "no key 'text'", "key 'text' is a number, not a string", "key 'text' has a lone surrogate
  // \ud800 that cannot be encoded as UTF-8", "not a JSON object".
  std::optional<std::string> extract(std::string_view json, std::vector<std::string>& values);

  const std::vector<std::string>& keys() const { return keys_; }

  // Containers nested deeper than this fail, like the RecursionError CPython 3.11 raises in
  // upstream's pool workers from depth 980 on (the top-level object counts as depth 1).
  static constexpr std::size_t kMaxDepth = 979;

 private:
  enum class Kind : unsigned char { kMissing, kString, kNumber, kBoolean, kNull, kObject, kArray };
  struct Field {
    Kind kind = Kind::kMissing;
    char32_t lone_surrogate = 0;  // first unpaired \uD800-\uDFFF escape of a string value, or 0
  };
  class Parser;

  std::vector<std::string> keys_;
  std::vector<std::size_t>
      first_index_;            // keys_[i] == keys_[first_index_[i]], its first occurrence
  std::vector<Field> fields_;  // per key index; only first occurrences are used
  // Reused between documents so that extraction allocates nothing in the steady state.
  std::string key_scratch_;
  std::vector<unsigned char> stack_;
};

}  // namespace mds::io
