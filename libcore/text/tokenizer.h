#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mds::text {

// Turns text into token ids. One Encoder per thread: it owns caches and is not thread-safe.
class Encoder {
 public:
  virtual ~Encoder() = default;
  // Appends the ids of `utf8` to `ids`. The text must be valid UTF-8.
  virtual void encode(std::string_view utf8, std::vector<std::int32_t>& ids) = 0;
};

// An immutable tokenizer shared by all threads.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Upstream --tokenizer-type name, e.g. "GPT2BPETokenizer".
  virtual std::string_view type_name() const = 0;
  // Number of ids the tokenizer can produce (unpadded), e.g. 50257 for GPT-2.
  virtual std::int64_t vocab_size() const = 0;
  // End-of-document id, if the vocabulary has one.
  virtual std::optional<std::int32_t> eod() const = 0;
  virtual std::unique_ptr<Encoder> make_encoder() const = 0;
  // Text of `ids`; invalid UTF-8 byte sequences become U+FFFD. Fails on ids outside the vocab.
  virtual std::string decode(std::span<const std::int32_t> ids) const = 0;

  // Convenience for tests and small inputs: encodes with a fresh encoder.
  std::vector<std::int32_t> encode(std::string_view utf8) const;
};

}  // namespace mds::text
