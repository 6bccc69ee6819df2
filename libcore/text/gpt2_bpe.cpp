#include "text/gpt2_bpe.h"

#include <limits>
#include <utility>

#include "base/error.h"
#include "text/gpt2_pretokenizer.h"
#include "text/token_cache.h"
#include "text/utf8.h"
#include "text/utf8_lossy.h"

namespace mds::text {
namespace {

constexpr char32_t kUnicodeAlphabetEnd = 0x144;  // every mapped code point is below U+0144

std::array<char32_t, 256> make_byte_to_unicode() {
  std::array<char32_t, 256> table{};
  char32_t extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[b] = printable ? static_cast<char32_t>(b) : extra++;
  }
  return table;
}

std::array<int, kUnicodeAlphabetEnd> make_unicode_to_byte() {
  std::array<int, kUnicodeAlphabetEnd> table{};
  table.fill(-1);
  const auto& forward = gpt2_byte_to_unicode();
  for (int b = 0; b < 256; ++b) table[forward[b]] = b;
  return table;
}

// Bytes of a symbol written in the unicode alphabet, or nullopt if a character is outside it.
std::optional<std::string> symbol_to_bytes(const std::u32string& symbol) {
  std::string bytes;
  bytes.reserve(symbol.size());
  for (const char32_t c : symbol) {
    const int b = gpt2_unicode_to_byte(c);
    if (b < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(b));
  }
  return bytes;
}

std::string to_utf8(const std::u32string& text) {
  std::string out;
  // Lone surrogates from JSON escapes are shown as U+FFFD.
  for (const char32_t c : text) append_utf8(out, c >= 0xD800 && c <= 0xDFFF ? U'\uFFFD' : c);
  return out;
}

class Gpt2Encoder final : public Encoder {
 public:
  explicit Gpt2Encoder(const GPT2BPETokenizer& tokenizer) : tokenizer_(tokenizer) {
    for (int b = 0; b < 256; ++b) byte_token_[b] = tokenizer.token_of_symbol(b);
  }

  void encode(std::string_view utf8, std::vector<std::int32_t>& ids) override {
    Gpt2PreTokenizer pretokenizer(utf8);
    std::string_view piece;
    while (pretokenizer.next(piece)) encode_one(piece, ids);
  }

 private:
  void encode_one(std::string_view piece, std::vector<std::int32_t>& ids) {
    if (piece.size() == 1) {
      ids.push_back(byte_token_[static_cast<unsigned char>(piece[0])]);
      return;
    }
    encode_through_cache(cache_, piece, ids,
                         [this](std::string_view p, auto& out) { encode_piece(p, out); });
  }

  void encode_piece(std::string_view piece, std::vector<std::int32_t>& ids) {
    if (piece.size() >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
      base::fail("GPT-2 encoding: a single pre-token of ", piece.size(),
                 " bytes is too long (the limit is 2 GiB)");
    }
    symbols_.resize(piece.size());
    for (std::size_t i = 0; i < piece.size(); ++i) {
      symbols_[i] = static_cast<unsigned char>(piece[i]);
    }
    bpe_merge(tokenizer_.merges(), symbols_, scratch_);
    for (const std::int32_t symbol : symbols_) ids.push_back(tokenizer_.token_of_symbol(symbol));
  }

  const GPT2BPETokenizer& tokenizer_;
  std::array<std::int32_t, 256> byte_token_{};
  std::vector<std::int32_t> symbols_;
  BpeScratch scratch_;
  TokenCache cache_;
};

}  // namespace

const std::array<char32_t, 256>& gpt2_byte_to_unicode() {
  static const std::array<char32_t, 256> table = make_byte_to_unicode();
  return table;
}

int gpt2_unicode_to_byte(char32_t code_point) {
  static const std::array<int, kUnicodeAlphabetEnd> table = make_unicode_to_byte();
  return code_point < kUnicodeAlphabetEnd ? table[code_point] : -1;
}

GPT2BPETokenizer::GPT2BPETokenizer(const std::string& vocab_file, const std::string& merge_file)
    : GPT2BPETokenizer(read_gpt2_vocab(vocab_file), read_gpt2_merges(merge_file)) {}

GPT2BPETokenizer::GPT2BPETokenizer(const std::vector<Gpt2VocabEntry>& vocab,
                                   const std::vector<Gpt2MergeLine>& merges) {
  std::unordered_map<std::string, std::int32_t> symbol_ids;
  symbol_ids.reserve(256 + 2 * merges.size());
  auto intern = [&symbol_ids](const std::string& bytes) {
    return symbol_ids.try_emplace(bytes, static_cast<std::int32_t>(symbol_ids.size()))
        .first->second;
  };
  for (int b = 0; b < 256; ++b) intern(std::string(1, static_cast<char>(b)));
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const Gpt2MergeLine& line = merges[rank];
    if (line.left.empty()) continue;  // a blank line: takes a rank, matches nothing
    // A symbol outside the byte alphabet can never occur in a word, so neither can its rule.
    const std::optional<std::string> left = symbol_to_bytes(line.left);
    const std::optional<std::string> right = symbol_to_bytes(line.right);
    if (!left || !right) continue;
    const std::int32_t left_id = intern(*left);
    const std::int32_t right_id = intern(*right);
    const std::int32_t merged_id = intern(*left + *right);
    merges_.set(left_id, right_id, {static_cast<std::int32_t>(rank), merged_id});
  }

  // json.load builds a dict: a repeated key keeps its first position and its last value; the
  // decoder {v: k for k, v in encoder.items()} then keeps the last key of a repeated id.
  std::unordered_map<std::u32string, std::size_t> position;
  position.reserve(vocab.size());
  std::vector<std::pair<const std::u32string*, std::int32_t>> dict;
  dict.reserve(vocab.size());
  for (const Gpt2VocabEntry& entry : vocab) {
    const auto [it, added] = position.try_emplace(entry.token, dict.size());
    if (added) {
      dict.emplace_back(&entry.token, entry.id);
    } else {
      dict[it->second].second = entry.id;
    }
  }
  vocab_size_ = static_cast<std::int64_t>(dict.size());
  symbol_token_.assign(symbol_ids.size(), 0);
  static const std::u32string kEndOfText = U"<|endoftext|>";
  for (const auto& [token, id] : dict) {
    if (*token == kEndOfText) eod_ = id;
    std::optional<std::string> bytes = symbol_to_bytes(*token);
    if (bytes) {
      const auto symbol = symbol_ids.find(*bytes);
      if (symbol != symbol_ids.end()) symbol_token_[symbol->second] = id;
      decoder_[id] = {std::move(*bytes), true};
    } else {
      decoder_[id] = {to_utf8(*token), false};
    }
  }
}

std::unique_ptr<Encoder> GPT2BPETokenizer::make_encoder() const {
  return std::make_unique<Gpt2Encoder>(*this);
}

std::string GPT2BPETokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string bytes;
  for (const std::int32_t id : ids) {
    const auto it = decoder_.find(id);
    if (it == decoder_.end()) {
      base::fail("cannot decode token id ", id, ": not in the GPT-2 vocabulary (", vocab_size_,
                 " entries)");
    }
    if (!it->second.decodable) {
      base::fail("cannot decode token id ", id, " (\"", it->second.bytes,
                 "\"): its vocab entry has a character outside GPT-2's byte alphabet");
    }
    bytes += it->second.bytes;
  }
  return decode_utf8_replace(bytes);
}

}  // namespace mds::text
