#include "text/hf_bpe_tokenizer.h"

#include <limits>

#include "base/error.h"
#include "text/gpt2_bpe.h"
#include "text/token_cache.h"
#include "text/unicode_nfc.h"
#include "text/utf8.h"
#include "text/utf8_lossy.h"

namespace mds::text {
namespace {

// The bytes a token written in the byte-level alphabet stands for, or nullopt when a character is
// outside it (then the token decodes as its own UTF-8, as the ByteLevel decoder does).
std::optional<std::string> byte_level_bytes(std::string_view token) {
  std::string bytes;
  for (std::size_t pos = 0; pos < token.size();) {
    const DecodedChar c = decode_char_at(token, pos);
    const int b = gpt2_unicode_to_byte(c.code_point);
    if (b < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(b));
    pos += c.length;
  }
  return bytes;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = text.find(from, pos)) != std::string::npos;
       pos = hit + from.size()) {
    out.append(text, pos, hit - pos);
    out.append(to);
  }
  if (pos == 0) return;
  out.append(text, pos, std::string::npos);
  text = std::move(out);
}

class HfBpeEncoder final : public Encoder {
 public:
  explicit HfBpeEncoder(const HfBpeTokenizer& tokenizer) : tokenizer_(tokenizer) {}

  void encode(std::string_view utf8, std::vector<std::int32_t>& ids) override {
    const auto& pieces = tokenizer_.single_template();
    if (pieces.empty()) {
      encode_sequence(utf8, ids);
      return;
    }
    for (const HfTemplatePiece& piece : pieces) {
      if (piece.sequence) {
        encode_sequence(utf8, ids);
      } else {
        ids.insert(ids.end(), piece.ids.begin(), piece.ids.end());
      }
    }
  }

 private:
  void encode_sequence(std::string_view utf8, std::vector<std::int32_t>& ids) {
    const auto on_text = [&](std::string_view text) {
      tokenizer_.pre_tokenizer().split(
          text, [&](std::string_view piece) { encode_piece_cached(piece, ids); });
    };
    const auto on_token = [&](std::int32_t id) { ids.push_back(id); };
    if (!tokenizer_.nfc_normalizer()) {
      tokenizer_.added_tokens().split(utf8, on_text, on_token);
      return;
    }
    tokenizer_.added_tokens().split(
        utf8, [this](std::string_view text) { return nfc(text); }, on_text, on_token);
  }

  std::string_view nfc(std::string_view text) {
    // Python's str never holds invalid UTF-8; the normalizer needs valid text.
    if (const std::optional<std::size_t> bad = find_invalid_utf8(text)) {
      base::fail("PretrainedFromHF: the text to normalize is not valid UTF-8 (at byte ", *bad,
                 " of a stretch between added tokens)");
    }
    if (is_nfc_quick_yes(text)) return text;
    normalized_ = nfc_normalize(text);
    return normalized_;
  }

  void encode_piece_cached(std::string_view piece, std::vector<std::int32_t>& ids) {
    if (piece.size() == 1) {
      const std::int32_t id = tokenizer_.token_of_symbol(static_cast<unsigned char>(piece[0]));
      if (id >= 0) ids.push_back(id);
      return;
    }
    encode_through_cache(cache_, piece, ids,
                         [this](std::string_view p, auto& out) { encode_piece(p, out); });
  }

  void encode_piece(std::string_view piece, std::vector<std::int32_t>& ids) {
    if (piece.size() >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
      base::fail("PretrainedFromHF encoding: a single pre-token of ", piece.size(),
                 " bytes is too long (the limit is 2 GiB)");
    }
    symbols_.clear();
    for (const char c : piece) {
      const std::int32_t symbol = static_cast<unsigned char>(c);
      if (tokenizer_.token_of_symbol(symbol) >= 0) symbols_.push_back(symbol);
    }
    if (symbols_.empty()) return;
    bpe_merge(tokenizer_.merges(), symbols_, scratch_);
    for (const std::int32_t symbol : symbols_) ids.push_back(tokenizer_.token_of_symbol(symbol));
  }

  const HfBpeTokenizer& tokenizer_;
  std::vector<std::int32_t> symbols_;
  BpeScratch scratch_;
  TokenCache cache_;
  std::string normalized_;
};

}  // namespace

std::string clean_up_tokenization(std::string text) {
  static constexpr std::pair<std::string_view, std::string_view> kReplacements[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kReplacements) replace_all(text, from, to);
  return text;
}

namespace {

// The splitter matches `normalized` added tokens in normalized text, so their content is
// normalized too.
std::vector<HfAddedToken> splitter_patterns(std::vector<HfAddedToken> patterns, bool nfc) {
  if (!nfc) return patterns;
  for (HfAddedToken& token : patterns) {
    if (token.normalized) token.content = nfc_normalize(token.content);
  }
  return patterns;
}

HfAddedVocabulary vocabulary_of(const HfTokenizerJson& json) {
  HfAddedVocabulary added(json.vocab);
  added.add_tokens(json.added_tokens);
  return added;
}

}  // namespace

HfBpeTokenizer::HfBpeTokenizer(const HfTokenizerJson& json, const HfTokenizerOptions& options)
    : HfBpeTokenizer(json, vocabulary_of(json), options) {}

HfBpeTokenizer::HfBpeTokenizer(const HfTokenizerJson& json, const HfAddedVocabulary& added,
                               const HfTokenizerOptions& options)
    : clean_up_(options.clean_up_tokenization_spaces),
      nfc_normalizer_(json.nfc_normalizer),
      added_(splitter_patterns(added.patterns(), json.nfc_normalizer)),
      pre_tokenizer_(json.pre_tokenizer),
      template_(json.single_template) {
  std::unordered_map<std::string, std::int32_t> vocab;  // the byte strings of the vocab keys
  vocab.reserve(json.vocab.size());
  for (const auto& [key, id] : added.model_vocab()) {
    token_text_[id] = key;
    if (std::optional<std::string> bytes = byte_level_bytes(key)) vocab[*bytes] = id;
  }
  for (const HfAddedToken& token : added.patterns()) {
    token_text_[token.id] = token.content;  // an added token's id decodes as its content
  }
  vocab_size_ = added.size_with_added_tokens();

  std::unordered_map<std::string, std::int32_t> symbol_ids;
  auto intern = [&symbol_ids](const std::string& bytes) {
    return symbol_ids.try_emplace(bytes, static_cast<std::int32_t>(symbol_ids.size()))
        .first->second;
  };
  for (int b = 0; b < 256; ++b) intern(std::string(1, static_cast<char>(b)));
  for (std::size_t rank = 0; rank < json.merges.size(); ++rank) {
    const auto& [left_text, right_text] = json.merges[rank];
    const std::optional<std::string> left = byte_level_bytes(left_text);
    const std::optional<std::string> right = byte_level_bytes(right_text);
    // As the library's BPE refuses it at load: every part of a merge is a vocabulary token.
    if (!left || !right || !vocab.contains(*left) || !vocab.contains(*right) ||
        !vocab.contains(*left + *right)) {
      base::fail("tokenizer.json: merge ", rank, " (\"", left_text, "\" \"", right_text,
                 "\"): a part or the merged token is not in the vocabulary");
    }
    merges_.set(intern(*left), intern(*right),
                {static_cast<std::int32_t>(rank), intern(*left + *right)});
  }
  symbol_token_.assign(symbol_ids.size(), -1);
  for (const auto& [bytes, symbol] : symbol_ids) {
    const auto it = vocab.find(bytes);
    if (it != vocab.end()) symbol_token_[symbol] = it->second;
  }
  if (options.eos_token) eod_ = added.token_to_id(*options.eos_token);
}

std::unique_ptr<Encoder> HfBpeTokenizer::make_encoder() const {
  return std::make_unique<HfBpeEncoder>(*this);
}

std::string HfBpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string bytes;
  for (const std::int32_t id : ids) {
    const auto it = token_text_.find(id);
    if (it == token_text_.end()) {
      base::fail("cannot decode token id ", id, ": not in the tokenizer's vocabulary (",
                 vocab_size_, " entries)");
    }
    if (std::optional<std::string> token_bytes = byte_level_bytes(it->second)) {
      bytes += *token_bytes;
    } else {
      bytes += it->second;
    }
  }
  std::string text = decode_utf8_replace(bytes);
  return clean_up_ ? clean_up_tokenization(std::move(text)) : text;
}

}  // namespace mds::text
