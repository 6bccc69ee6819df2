#include "text/hf_added_tokens.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "text/unicode_classes.h"
#include "text/utf8.h"

namespace mds::text {
namespace {

// Start of the whitespace run that ends `text` (text.size() when there is none).
std::size_t trailing_space_start(std::string_view text) {
  std::size_t start = text.size();
  while (start > 0) {
    std::size_t lead = start - 1;
    while (lead > 0 && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) --lead;
    if (!is_white_space(decode_char_at(text, lead).code_point)) break;
    start = lead;
  }
  return start;
}

// Length of the whitespace run that starts `text`.
std::size_t leading_space_length(std::string_view text) {
  std::size_t end = 0;
  while (end < text.size()) {
    const DecodedChar c = decode_char_at(text, end);
    if (!is_white_space(c.code_point)) break;
    end += c.length;
  }
  return end;
}

}  // namespace

HfAddedVocabulary::HfAddedVocabulary(
    const std::vector<std::pair<std::string, std::int32_t>>& model_vocab) {
  for (const auto& [key, id] : model_vocab) model_vocab_[key] = id;
  model_size_ = static_cast<std::int64_t>(model_vocab_.size());
}

std::optional<std::int32_t> HfAddedVocabulary::token_to_id(const std::string& content) const {
  if (const auto it = added_ids_.find(content); it != added_ids_.end()) return it->second;
  if (const auto it = model_vocab_.find(content); it != model_vocab_.end()) return it->second;
  return std::nullopt;
}

const HfAddedToken* HfAddedVocabulary::token_of_id(std::int32_t id) const {
  const auto it = tokens_by_id_.find(id);
  return it == tokens_by_id_.end() ? nullptr : &it->second;
}

void HfAddedVocabulary::add_tokens(const std::vector<HfAddedToken>& tokens) {
  for (const HfAddedToken& token : tokens) {
    if (token.special && !token.content.empty() && !special_contents_.contains(token.content)) {
      special_tokens_.push_back(token);
      special_contents_.insert(token.content);
    }
  }
  const auto same = [](const HfAddedToken& a, const HfAddedToken& b) {
    return a.content == b.content && a.single_word == b.single_word && a.lstrip == b.lstrip &&
           a.rstrip == b.rstrip && a.normalized == b.normalized && a.special == b.special;
  };
  for (const HfAddedToken& token : tokens) {
    if (token.content.empty()) continue;
    bool held = false;
    for (const auto& [id, existing] : tokens_by_id_) held = held || same(existing, token);
    if (held) continue;
    std::int64_t id;
    if (const std::optional<std::int32_t> known = token_to_id(token.content)) {
      id = *known;
    } else if (added_ids_.empty()) {
      id = model_size_;
    } else {
      std::int64_t max = 0;
      for (const auto& [content, added] : added_ids_) max = std::max<std::int64_t>(max, added);
      id = max >= model_size_ || model_size_ == 0 ? max + 1 : model_size_;
    }
    if (id > std::numeric_limits<std::int32_t>::max()) {
      base::fail("tokenizer.json: added token \"", token.content, "\" would get id ", id,
                 ", past the largest token id mds stores (2^31 - 1)");
    }
    added_ids_[token.content] = static_cast<std::int32_t>(id);
    HfAddedToken stored = token;
    stored.id = static_cast<std::int32_t>(id);
    tokens_by_id_[stored.id] = stored;
    if (!special_contents_.contains(token.content)) other_tokens_.push_back(stored);
  }
}

std::vector<HfAddedToken> HfAddedVocabulary::patterns() const {
  std::vector<HfAddedToken> out;
  for (const auto* list : {&special_tokens_, &other_tokens_}) {
    for (const HfAddedToken& entry : *list) {
      const std::int32_t id = *token_to_id(entry.content);
      HfAddedToken pattern = entry;
      pattern.id = id;
      if (const HfAddedToken* holder = token_of_id(id)) {
        pattern.lstrip = holder->lstrip;
        pattern.rstrip = holder->rstrip;
        pattern.single_word = holder->single_word;
      }
      out.push_back(std::move(pattern));
    }
  }
  return out;
}

std::int64_t HfAddedVocabulary::size_with_added_tokens() const {
  std::int64_t size = model_size_;
  for (const auto& [content, id] : added_ids_) size += model_vocab_.contains(content) ? 0 : 1;
  return size;
}

HfAddedTokenSplitter::HfAddedTokenSplitter(const std::vector<HfAddedToken>& patterns)
    : tokens_(patterns) {
  for (const HfAddedToken& token : tokens_) {
    if (token.single_word) {
      base::fail("added token ", token.content,
                 ": single_word tokens are not supported by mds's tokenizer.json reader");
    }
    Pass& pass = token.normalized ? normalized_ : raw_;
    const auto first = static_cast<unsigned char>(token.content[0]);
    pass.by_first_byte[first].push_back(&token);
    pass.starts[first] = true;
    pass.empty = false;
  }
  for (Pass* pass : {&raw_, &normalized_}) {
    const auto first_bytes = std::count(std::begin(pass->starts), std::end(pass->starts), true);
    if (first_bytes == 1) {
      pass->only_first_byte = static_cast<int>(
          std::find(std::begin(pass->starts), std::end(pass->starts), true) - pass->starts);
    }
    for (auto& candidates : pass->by_first_byte) {
      std::stable_sort(candidates.begin(), candidates.end(), [](const auto* a, const auto* b) {
        return a->content.size() > b->content.size();
      });
    }
  }
}

std::size_t HfAddedTokenSplitter::next_candidate(const Pass& pass, std::string_view text,
                                                 std::size_t pos) {
  if (pass.only_first_byte >= 0) {
    const void* hit = std::memchr(text.data() + pos, pass.only_first_byte, text.size() - pos);
    return hit == nullptr ? text.size() : static_cast<const char*>(hit) - text.data();
  }
  while (pos < text.size() && !pass.starts[static_cast<unsigned char>(text[pos])]) ++pos;
  return pos;
}

const HfAddedToken* HfAddedTokenSplitter::longest_at(const Pass& pass, std::string_view text,
                                                     std::size_t pos) const {
  for (const HfAddedToken* token : pass.by_first_byte[static_cast<unsigned char>(text[pos])]) {
    if (text.substr(pos, token->content.size()) == token->content) return token;
  }
  return nullptr;
}

void HfAddedTokenSplitter::split_pass(const Pass& pass, std::string_view text,
                                      const std::function<void(std::string_view)>& on_text,
                                      const std::function<void(std::int32_t)>& on_token) const {
  if (pass.empty) {
    if (!text.empty()) on_text(text);
    return;
  }
  std::size_t emitted = 0;  // text before this is handed out
  for (std::size_t pos = next_candidate(pass, text, 0); pos < text.size();
       pos = next_candidate(pass, text, pos)) {
    const HfAddedToken* token = longest_at(pass, text, pos);
    if (token == nullptr) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = pos + token->content.size();
    // Whitespace a previous match already took stays with it.
    if (token->lstrip) start = std::max(trailing_space_start(text.substr(0, start)), emitted);
    if (token->rstrip) stop += leading_space_length(text.substr(stop));
    if (emitted < start) on_text(text.substr(emitted, start - emitted));
    on_token(token->id);
    emitted = stop;
    // The matcher goes on after the match itself, so a token starting with whitespace may still
    // match inside what an rstrip token took (both ids are kept, as the library keeps them).
    pos += token->content.size();
  }
  if (emitted < text.size()) on_text(text.substr(emitted));
}

void HfAddedTokenSplitter::split(std::string_view text,
                                 const std::function<void(std::string_view)>& on_text,
                                 const std::function<void(std::int32_t)>& on_token) const {
  if (tokens_.empty()) {
    if (!text.empty()) on_text(text);
    return;
  }
  split_pass(
      raw_, text,
      [&](std::string_view piece) { split_pass(normalized_, piece, on_text, on_token); }, on_token);
}

void HfAddedTokenSplitter::split(std::string_view text, const Normalizer& normalize,
                                 const std::function<void(std::string_view)>& on_text,
                                 const std::function<void(std::int32_t)>& on_token) const {
  split_pass(
      raw_, text,
      [&](std::string_view piece) { split_pass(normalized_, normalize(piece), on_text, on_token); },
      on_token);
}

}  // namespace mds::text
