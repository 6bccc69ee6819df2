// What `generate` writes (tools/generate_samples_gpt.py, data.md §7.4), with upstream's
// off-by-ones fixed (docs/generate.md).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "tasks/generation.h"
#include "text/tokenizer.h"

namespace mds::tasks {

// One unconditional sample as a json.dumps line (no newline):
// {"text": <generated tokens after the leading EOD, without the final EOD>, "length": <their
// count>, "finished": <ended with EOD>}.
std::string unconditional_json_line(const GenerationResult& result,
                                    const text::Tokenizer& tokenizer);

// One prompt's record: "\nContext:" + prompt + "\n\nMegatron-LM:" + continuation + "\n", where
// the continuation is the detokenized whole sequence after the prompt's code points (upstream's
// slice; the text of a final EOD, "<|endoftext|>", stays as upstream writes it).
std::string conditional_record(std::string_view prompt, const GenerationResult& result,
                               const text::Tokenizer& tokenizer);

}  // namespace mds::tasks
