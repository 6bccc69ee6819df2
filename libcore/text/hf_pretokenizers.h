// The pre-tokenizer steps of a Hugging Face tokenizer.json that mds implements
// (HfPreTokenizerStep), run over one stretch of text between added tokens.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "text/hf_tokenizer_json.h"

namespace mds::text {

// Byte length of the match of BLOOM's " ?[^(\s|[.,!?…。，、।۔،])]+" at the start of `text`, or 0
// when there is none there: an optional space, then a run of characters that are neither
// White_Space nor one of ( ) | . , ! ? … 。 ， 、 । ۔ ، (Oniguruma reads the nested class that
// way).
std::size_t bloom_match_length(std::string_view text);

// Runs the steps over `text` and calls emit for each final piece, in order. Pieces are views of
// `text`, except where ByteLevel's add_prefix_space prepends a space (then of a scratch buffer,
// valid during the call).
class HfPreTokenizer {
 public:
  explicit HfPreTokenizer(std::vector<HfPreTokenizerStep> steps) : steps_(std::move(steps)) {}

  void split(std::string_view text, const std::function<void(std::string_view)>& emit) const;

 private:
  void run(std::size_t step, std::string_view piece,
           const std::function<void(std::string_view)>& emit) const;

  std::vector<HfPreTokenizerStep> steps_;
};

}  // namespace mds::text
