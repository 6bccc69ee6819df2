// The added tokens of a Hugging Face tokenizer (tokenizer.json's `added_tokens`), found in raw
// text before pre-tokenization as the `tokenizers` library finds them: first the tokens that are
// not `normalized`, then, in the text between those, the normalized ones; at each step the
// leftmost match, the longest at that position, then on after it (Aho-Corasick's
// leftmost-longest); `lstrip`/`rstrip` tokens absorb the whitespace before/after a match.
#pragma once
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "text/hf_tokenizer_json.h"

namespace mds::text {

class HfAddedTokenSplitter {
 public:
  // single_word tokens are refused (their word test needs Unicode's Alphabetic property).
  explicit HfAddedTokenSplitter(const std::vector<HfAddedToken>& tokens);

  // Calls on_text for each stretch of ordinary text (never empty) and on_token for each added
  // token found, in text order.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_text,
             const std::function<void(std::int32_t)>& on_token) const;

  bool empty() const { return tokens_.empty(); }

 private:
  // One matching pass over the tokens with the given `normalized` flag.
  struct Pass {
    std::vector<const HfAddedToken*> by_first_byte[256];  // longest first
  };
  struct Found {
    std::size_t start, stop;
    const HfAddedToken* token;
  };

  const HfAddedToken* longest_at(const Pass& pass, std::string_view text, std::size_t pos) const;
  void split_pass(const Pass& pass, std::string_view text,
                  const std::function<void(std::string_view)>& on_text,
                  const std::function<void(std::int32_t)>& on_token) const;

  std::vector<HfAddedToken> tokens_;
  Pass raw_, normalized_;
};

}  // namespace mds::text
