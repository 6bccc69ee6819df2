#include "text/hf_added_tokens.h"

#include <algorithm>

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

HfAddedTokenSplitter::HfAddedTokenSplitter(const std::vector<HfAddedToken>& tokens)
    : tokens_(tokens) {
  for (const HfAddedToken& token : tokens_) {
    if (token.single_word) {
      base::fail("added token ", token.content,
                 ": single_word tokens are not supported by mds's tokenizer.json reader");
    }
    Pass& pass = token.normalized ? normalized_ : raw_;
    pass.by_first_byte[static_cast<unsigned char>(token.content[0])].push_back(&token);
  }
  for (Pass* pass : {&raw_, &normalized_}) {
    for (auto& candidates : pass->by_first_byte) {
      std::stable_sort(candidates.begin(), candidates.end(), [](const auto* a, const auto* b) {
        return a->content.size() > b->content.size();
      });
    }
  }
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
  std::size_t emitted = 0;  // text before this is handed out
  for (std::size_t pos = 0; pos < text.size();) {
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
    pos = pos + token->content.size();  // the matcher goes on after the match itself
    pos = std::max(pos, stop);
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

}  // namespace mds::text
