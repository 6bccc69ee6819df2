// The detokenizers of upstream's zero-shot evaluation (tasks/zeroshot_gpt/detokenizer.py,
// data.md §6.2): they turn word-level tokenized corpora (WikiText's " @-@ ", PTB's " n't") back
// into running text before BPE tokenization. Inputs are valid UTF-8.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace mds::tasks {

enum class Detokenizer { kPtb, kWikitext, kLambada };

std::string ptb_detokenize(std::string_view text);
// Upstream's steps in order, including its regex `/' [0-9]/` whose replacement is the literal
// text "/'[0-9]/" (a bug kept so that token counts match).
std::string wikitext_detokenize(std::string_view text);
// LAMBADA's detokenizer is the identity.
std::string detokenize(Detokenizer kind, std::string_view text);

// Upstream picks the detokenizer by substring of the data path, checking "ptb", "wiki",
// "lambada" in this order; nullopt when none occurs.
std::optional<Detokenizer> detokenizer_for_path(std::string_view path);

}  // namespace mds::tasks
