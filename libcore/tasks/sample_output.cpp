#include "tasks/sample_output.h"

#include <vector>

#include "tasks/json_text.h"
#include "tasks/python_text.h"

namespace mds::tasks {
namespace {

std::string decode(const text::Tokenizer& tokenizer, const std::vector<std::int64_t>& tokens,
                   std::size_t begin, std::size_t end) {
  const std::vector<std::int32_t> ids(tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                                      tokens.begin() + static_cast<std::ptrdiff_t>(end));
  return tokenizer.decode(ids);
}

}  // namespace

std::string unconditional_json_line(const GenerationResult& result,
                                    const text::Tokenizer& tokenizer) {
  const std::size_t begin = static_cast<std::size_t>(result.context_length);
  const std::size_t end = result.tokens.size() - (result.finished ? 1 : 0);
  return "{\"text\": " + json_string(decode(tokenizer, result.tokens, begin, end)) +
         ", \"length\": " + std::to_string(result.generated()) +
         ", \"finished\": " + (result.finished ? "true" : "false") + "}";
}

std::string conditional_record(std::string_view prompt, const GenerationResult& result,
                               const text::Tokenizer& tokenizer) {
  const std::string all = decode(tokenizer, result.tokens, 0, result.tokens.size());
  // Python's text[len(prompt):] counts code points.
  std::size_t skip = code_point_count(prompt), pos = 0;
  while (skip > 0 && pos < all.size()) {
    next_code_point(all, pos);
    --skip;
  }
  std::string record = "\nContext:";
  record.append(prompt);
  record += "\n\nMegatron-LM:";
  record.append(all, pos);
  record += "\n";
  return record;
}

}  // namespace mds::tasks
