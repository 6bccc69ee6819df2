// The added tokens of a Hugging Face tokenizer (tokenizer.json's `added_tokens`), found in raw
// text before pre-tokenization as the `tokenizers` library finds them: first the tokens that are
// not `normalized`, then, in the text between those, the normalized ones; at each step the
// leftmost match, the longest at that position, then on after it (Aho-Corasick's
// leftmost-longest); `lstrip`/`rstrip` tokens absorb the whitespace before/after a match.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "text/hf_tokenizer_json.h"

namespace mds::text {

// The `tokenizers` library's AddedVocabulary (0.19.1): the added tokens and their ids, built as
// it builds them when a tokenizer.json is loaded and transformers adds its special tokens. A
// token's id is the vocabulary's (or an earlier added token's) for its content, else the next id
// after the vocabulary and the added ids; the ids written in the file are not used. Adding a token
// equal in every field to one already held changes nothing; one with the same content and other
// flags replaces the flags that id matches with.
class HfAddedVocabulary {
 public:
  explicit HfAddedVocabulary(const std::vector<std::pair<std::string, std::int32_t>>& model_vocab);

  void add_tokens(const std::vector<HfAddedToken>& tokens);

  // An added token's id for `content`, else the model vocabulary's.
  std::optional<std::int32_t> token_to_id(const std::string& content) const;
  // The added token holding `id`, or null.
  const HfAddedToken* token_of_id(std::int32_t id) const;
  // What the splitter looks for: the special tokens, then the other added tokens, in the order
  // they were first added, each with the id its content maps to now and that id's flags (the
  // `normalized` flag, which picks the pass, stays the entry's own).
  std::vector<HfAddedToken> patterns() const;
  // len(tokenizer): the distinct strings of the model vocabulary and the added tokens.
  std::int64_t size_with_added_tokens() const;
  const std::unordered_map<std::string, std::int32_t>& model_vocab() const { return model_vocab_; }

 private:
  std::unordered_map<std::string, std::int32_t> model_vocab_;
  std::int64_t model_size_ = 0;
  std::unordered_map<std::string, std::int32_t> added_ids_;  // content -> id
  std::map<std::int32_t, HfAddedToken> tokens_by_id_;
  std::vector<HfAddedToken> special_tokens_, other_tokens_;
  std::unordered_set<std::string> special_contents_;
};

class HfAddedTokenSplitter {
 public:
  // `patterns`: HfAddedVocabulary::patterns(), the `normalized` ones' content put through the
  // tokenizer's normalizer (as the library matches them). single_word tokens are refused (their
  // word test needs Unicode's Alphabetic property).
  explicit HfAddedTokenSplitter(const std::vector<HfAddedToken>& patterns);

  // Maps a stretch between the tokens that are not `normalized` to the text the others are
  // searched in (the tokenizer's normalizer); its view must stay valid until its next call.
  using Normalizer = std::function<std::string_view(std::string_view)>;

  // Calls on_text for each stretch of ordinary text (never empty) and on_token for each added
  // token found, in text order.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_text,
             const std::function<void(std::int32_t)>& on_token) const;
  // The same with a normalizer: `normalized` tokens are matched in (and on_text gets) its output.
  void split(std::string_view text, const Normalizer& normalize,
             const std::function<void(std::string_view)>& on_text,
             const std::function<void(std::int32_t)>& on_token) const;

  bool empty() const { return tokens_.empty(); }

 private:
  // One matching pass over the tokens with the given `normalized` flag.
  struct Pass {
    std::vector<const HfAddedToken*> by_first_byte[256];  // longest first
    bool starts[256] = {};                                // whether by_first_byte[b] has any
    bool empty = true;
    int only_first_byte = -1;  // the one byte every token starts with, if there is one
  };
  struct Found {
    std::size_t start, stop;
    const HfAddedToken* token;
  };

  const HfAddedToken* longest_at(const Pass& pass, std::string_view text, std::size_t pos) const;
  // The first position at or after `pos` where a token of the pass may start (text.size(): none).
  static std::size_t next_candidate(const Pass& pass, std::string_view text, std::size_t pos);
  void split_pass(const Pass& pass, std::string_view text,
                  const std::function<void(std::string_view)>& on_text,
                  const std::function<void(std::int32_t)>& on_token) const;

  std::vector<HfAddedToken> tokens_;
  Pass raw_, normalized_;
};

}  // namespace mds::text
