// The two zero-shot datasets of upstream's tasks/zeroshot_gpt/datasets.py (data.md §6.2, §6.3):
// overlapping language-model windows over one token stream (WIKITEXT103) and LAMBADA's
// context + last-word samples. Both pad with EOD to seq_length + 1 tokens.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace mds::tasks {

// One sample: seq_length + 1 tokens (inputs are tokens[:-1], labels tokens[1:]) and a mask over
// the seq_length labels saying which are scored.
struct EvalSample {
  std::vector<std::int64_t> tokens;
  std::vector<std::uint8_t> pad_mask;
};

// upstream _LMDataset: windows of seq_length + 1 tokens starting every `overlap` tokens
// (overlap = max(1, overlapping_eval or seq_length)); after the first window only the last
// `overlap` labels of a window are scored, so every target is scored once.
class LmWindows {
 public:
  LmWindows(std::vector<std::int64_t> tokens, std::int64_t seq_length, std::int64_t pad_id,
            std::optional<std::int64_t> overlapping_eval);
  std::int64_t size() const { return count_; }
  std::int64_t overlap() const { return overlap_; }
  EvalSample window(std::int64_t index) const;

 private:
  std::vector<std::int64_t> tokens_;
  std::int64_t seq_length_, pad_id_, overlap_, count_;
};

// WIKITEXT103 input: the raw file's token counts and its detokenized BPE tokens.
struct WikitextData {
  std::int64_t num_original_tokens = 0;   // len(text.strip().split(" "))
  std::int64_t num_tokenized_tokens = 0;  // BPE tokens of the detokenized text
  std::vector<std::int64_t> tokens;
};
// Reads `path` (UTF-8), counts, detokenizes (the detokenizer is chosen by the path, as upstream;
// a path naming none of ptb/wiki/lambada fails) and tokenizes.
WikitextData read_wikitext(const std::string& path, const text::Tokenizer& tokenizer);

// LAMBADA: context tokens and target tokens (the final BPE token, or with `strict` the BPE
// tokens of " " + the last whitespace-separated word).
struct LambadaExample {
  std::vector<std::int64_t> context;
  std::vector<std::int64_t> target;
};
LambadaExample lambada_example(std::string_view text, const text::Tokenizer& tokenizer,
                               bool strict);
// context + target padded with pad_id to seq_length + 1, pad_mask 1 exactly on the target labels.
// Fails when the example has more than seq_length + 1 tokens (upstream does not handle it).
EvalSample lambada_sample(const LambadaExample& example, std::int64_t seq_length,
                          std::int64_t pad_id);
// Every line of a JSON-lines file ({"text": ...} each; lines end at \n, \r\n or \r as Python's
// text mode reads them). A bad line fails naming the file and line number.
std::vector<LambadaExample> read_lambada(const std::string& path, const text::Tokenizer& tokenizer,
                                         bool strict);

}  // namespace mds::tasks
