#include "text/hf_pretokenizers.h"

#include <array>

#include "text/gpt2_pretokenizer.h"
#include "text/unicode_classes.h"
#include "text/utf8.h"

namespace mds::text {
namespace {

constexpr bool bloom_word_char(char32_t c) {
  switch (c) {
    case U'(':
    case U')':
    case U'|':
    case U'.':
    case U',':
    case U'!':
    case U'?':
    case U'\u2026':  // …
    case U'\u3002':  // 。
    case U'\uFF0C':  // ，
    case U'\u3001':  // 、
    case U'\u0964':  // ।
    case U'\u06D4':  // ۔
    case U'\u060C':  // ،
      return false;
    default:
      return !is_white_space(c);
  }
}

constexpr std::array<bool, 128> make_ascii_bloom_word() {
  std::array<bool, 128> word{};
  for (char32_t c = 0; c < 128; ++c) word[c] = bloom_word_char(c);
  return word;
}
constexpr std::array<bool, 128> kAsciiBloomWord = make_ascii_bloom_word();

// Length of the run of BLOOM word characters at `pos` (ASCII by table, the rest decoded).
std::size_t bloom_word_run(std::string_view text, std::size_t pos) {
  std::size_t end = pos;
  while (end < text.size()) {
    const auto byte = static_cast<unsigned char>(text[end]);
    if (byte < 0x80) {
      if (!kAsciiBloomWord[byte]) break;
      ++end;
      continue;
    }
    const DecodedChar c = decode_char_at(text, end);
    if (!bloom_word_char(c.code_point)) break;
    end += c.length;
  }
  return end - pos;
}

// Isolated split: each match and each stretch between matches is a piece.
template <typename Emit>
void split_bloom(std::string_view text, Emit&& emit) {
  std::size_t gap = 0;  // start of the text since the last match
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t length = bloom_match_length(text.substr(pos));
    if (length == 0) {
      pos += decode_char_at(text, pos).length;
      continue;
    }
    if (gap < pos) emit(text.substr(gap, pos - gap));
    emit(text.substr(pos, length));
    pos += length;
    gap = pos;
  }
  if (gap < text.size()) emit(text.substr(gap));
}

// GPT-2's regex matches every character, so its matches are the pieces.
template <typename Emit>
void split_gpt2(std::string_view text, Emit&& emit) {
  // The tokenizers library's regex engine is Oniguruma, at Unicode 14.0.
  Gpt2PreTokenizer pretokenizer(text, Gpt2PreTokenizer::Classes::kOniguruma);
  std::string_view piece;
  while (pretokenizer.next(piece)) emit(piece);
}

}  // namespace

std::size_t bloom_match_length(std::string_view text) {
  if (text.empty()) return 0;
  if (text[0] == ' ') {
    const std::size_t run = bloom_word_run(text, 1);
    if (run > 0) return 1 + run;
  }
  return bloom_word_run(text, 0);
}

void HfPreTokenizer::split(std::string_view text,
                           const std::function<void(std::string_view)>& emit) const {
  run(0, text, emit);
}

void HfPreTokenizer::run(std::size_t step, std::string_view piece,
                         const std::function<void(std::string_view)>& emit) const {
  if (step == steps_.size()) {
    emit(piece);
    return;
  }
  // The last step hands its pieces straight to `emit`.
  const bool last = step + 1 == steps_.size();
  const auto next = [&](std::string_view sub) { run(step + 1, sub, emit); };
  const auto split_with = [&](auto splitter) {
    if (last) {
      splitter(emit);
    } else {
      splitter(next);
    }
  };
  const HfPreTokenizerStep& s = steps_[step];
  if (s.kind == HfPreTokenizerStep::Kind::kSplitIsolated) {
    if (s.pattern == HfSplitPattern::kBloom) {
      split_with([&](const auto& sink) { split_bloom(piece, sink); });
    } else {
      split_with([&](const auto& sink) { split_gpt2(piece, sink); });
    }
    return;
  }
  // ByteLevel: the byte -> unicode mapping happens in the model (symbols are bytes).
  std::string prefixed;
  if (s.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
    prefixed.reserve(piece.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(piece);
    piece = prefixed;
  }
  if (s.use_regex) {
    split_with([&](const auto& sink) { split_gpt2(piece, sink); });
  } else {
    split_with([&](const auto& sink) { sink(piece); });
  }
}

}  // namespace mds::text
