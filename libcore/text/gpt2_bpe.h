#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/bpe_merge.h"
#include "text/gpt2_files.h"
#include "text/tokenizer.h"

namespace mds::text {

// GPT-2 byte-level BPE, byte-identical to upstream megatron/tokenizer/gpt2_tokenization.py
// (data.md §4.2): regex pre-tokenization, byte -> unicode symbols, rank-ordered merges, symbols
// missing from the vocab -> id 0, no special tokens (`<|endoftext|>` in text is plain text).
//
// Symbols are interned byte strings: ids 0..255 are the single bytes, then every symbol named by
// a merge rule. Since the byte -> unicode map is a bijection, comparing byte strings is the same
// as upstream comparing unicode strings.
class GPT2BPETokenizer final : public Tokenizer {
 public:
  GPT2BPETokenizer(const std::string& vocab_file, const std::string& merge_file);
  // From already parsed files (tests build small vocabularies this way).
  GPT2BPETokenizer(const std::vector<Gpt2VocabEntry>& vocab,
                   const std::vector<Gpt2MergeLine>& merges);

  std::string_view type_name() const override { return "GPT2BPETokenizer"; }
  std::int64_t vocab_size() const override { return vocab_size_; }
  std::optional<std::int32_t> eod() const override { return eod_; }
  // The encoder keeps a pointer to this tokenizer, which must outlive it.
  std::unique_ptr<Encoder> make_encoder() const override;
  std::string decode(std::span<const std::int32_t> ids) const override;

  // The pieces of encoding, for encoders and tests.
  const MergeTable& merges() const { return merges_; }
  std::int32_t token_of_symbol(std::int32_t symbol) const { return symbol_token_[symbol]; }

 private:
  struct DecodedToken {
    std::string bytes;
    bool decodable = true;  // false if the vocab key has a character outside the byte alphabet
  };

  std::int64_t vocab_size_ = 0;
  std::optional<std::int32_t> eod_;
  MergeTable merges_;
  std::vector<std::int32_t> symbol_token_;  // vocab id of each symbol, 0 when absent
  std::unordered_map<std::int32_t, DecodedToken> decoder_;
};

// GPT-2's reversible byte -> unicode map (bytes_to_unicode): printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100.. in byte order.
const std::array<char32_t, 256>& gpt2_byte_to_unicode();
// The inverse: byte of a code point, or -1 if the code point is not in the alphabet.
int gpt2_unicode_to_byte(char32_t code_point);

}  // namespace mds::text
