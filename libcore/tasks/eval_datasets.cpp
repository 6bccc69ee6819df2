#include "tasks/eval_datasets.h"

#include <algorithm>

#include "base/error.h"
#include "base/mapped_file.h"
#include "io/json_fields.h"
#include "tasks/detokenizer.h"
#include "tasks/python_text.h"
#include "text/utf8.h"

namespace mds::tasks {
namespace {

std::vector<std::int64_t> tokenize(const text::Tokenizer& tokenizer, std::string_view text) {
  const std::vector<std::int32_t> ids = tokenizer.encode(text);
  return {ids.begin(), ids.end()};
}

std::string read_text_file(const std::string& path) {
  const base::MappedFile file(path);
  std::string text(file.bytes());
  if (const auto bad = text::find_invalid_utf8(text)) {
    base::fail(path, ": not valid UTF-8 at byte ", *bad);
  }
  return text;
}

}  // namespace

LmWindows::LmWindows(std::vector<std::int64_t> tokens, std::int64_t seq_length, std::int64_t pad_id,
                     std::optional<std::int64_t> overlapping_eval)
    : tokens_(std::move(tokens)), seq_length_(seq_length), pad_id_(pad_id) {
  overlap_ = std::max<std::int64_t>(1, overlapping_eval.value_or(seq_length));
  const std::int64_t targets = static_cast<std::int64_t>(tokens_.size()) - 1;
  const std::int64_t rest = std::max<std::int64_t>(targets - overlap_, 0);
  count_ = std::max<std::int64_t>((rest + overlap_ - 1) / overlap_ + 1, 1);
}

EvalSample LmWindows::window(std::int64_t index) const {
  const std::int64_t start = index * overlap_;
  const std::int64_t total = static_cast<std::int64_t>(tokens_.size());
  const std::int64_t end = std::min(total, std::max(start, start + seq_length_ + 1));
  const std::int64_t real = std::max<std::int64_t>(0, end - start);
  EvalSample sample;
  sample.tokens.assign(static_cast<std::size_t>(seq_length_ + 1), pad_id_);
  for (std::int64_t i = 0; i < real; ++i) {
    sample.tokens[static_cast<std::size_t>(i)] = tokens_[static_cast<std::size_t>(start + i)];
  }
  // pad_mask[p] scores label p (token p + 1).
  sample.pad_mask.assign(static_cast<std::size_t>(seq_length_), 0);
  for (std::int64_t p = 0; p + 1 < real; ++p) sample.pad_mask[static_cast<std::size_t>(p)] = 1;
  if (overlap_ != seq_length_ && index != 0) {
    // Python's pad_mask[:-overlap] *= 0 (an overlap beyond seq_length clears nothing).
    const std::int64_t cleared = std::max<std::int64_t>(0, seq_length_ - overlap_);
    for (std::int64_t p = 0; p < cleared; ++p) sample.pad_mask[static_cast<std::size_t>(p)] = 0;
  }
  return sample;
}

WikitextData read_wikitext(const std::string& path, const text::Tokenizer& tokenizer) {
  const std::optional<Detokenizer> kind = detokenizer_for_path(path);
  if (!kind) {
    base::fail(path,
               ": cannot pick a detokenizer: upstream chooses it by the path, which must contain "
               "'wiki' (WikiText), 'ptb' or 'lambada'");
  }
  const std::string raw = read_text_file(path);
  WikitextData data;
  const std::string_view stripped = python_strip(raw);
  data.num_original_tokens = 1 + std::count(stripped.begin(), stripped.end(), ' ');
  data.tokens = tokenize(tokenizer, detokenize(*kind, raw));
  data.num_tokenized_tokens = static_cast<std::int64_t>(data.tokens.size());
  if (data.num_tokenized_tokens < 2) {
    base::fail(path, ": ", data.num_tokenized_tokens,
               " tokens after detokenization; at least 2 are needed to score one");
  }
  if (data.num_original_tokens < 2) {
    base::fail(path, ": only one word in the file; the token ratio needs at least 2");
  }
  return data;
}

LambadaExample lambada_example(std::string_view text, const text::Tokenizer& tokenizer,
                               bool strict) {
  LambadaExample example;
  if (!strict) {
    example.context = tokenize(tokenizer, text);
    if (example.context.empty()) base::fail("the text is empty");
    example.target.push_back(example.context.back());
    example.context.pop_back();
    return example;
  }
  const std::vector<std::string_view> words = python_split(text);
  if (words.empty()) base::fail("the text has no word");
  const std::string_view last = words.back();
  const std::size_t cut = text.rfind(last);
  example.context = tokenize(tokenizer, python_strip(text.substr(0, cut)));
  std::string spaced(1, ' ');
  spaced.append(last);
  example.target = tokenize(tokenizer, spaced);
  return example;
}

EvalSample lambada_sample(const LambadaExample& example, std::int64_t seq_length,
                          std::int64_t pad_id) {
  const std::size_t length = example.context.size() + example.target.size();
  if (static_cast<std::int64_t>(length) > seq_length + 1) {
    base::fail(length, " tokens (context and target) do not fit --seq-length ", seq_length, " + 1");
  }
  EvalSample sample;
  sample.tokens = example.context;
  sample.tokens.insert(sample.tokens.end(), example.target.begin(), example.target.end());
  sample.tokens.resize(static_cast<std::size_t>(seq_length + 1), pad_id);
  std::vector<std::uint8_t> mask(example.context.size(), 0);
  mask.resize(length, 1);
  mask.resize(static_cast<std::size_t>(seq_length + 1), 0);
  sample.pad_mask.assign(mask.begin() + 1, mask.end());
  return sample;
}

std::vector<LambadaExample> read_lambada(const std::string& path, const text::Tokenizer& tokenizer,
                                         bool strict) {
  const std::string content = read_text_file(path);
  io::JsonFieldExtractor extractor({"text"});
  std::vector<std::string> values;
  std::vector<LambadaExample> examples;
  std::size_t pos = 0;
  for (std::int64_t line_number = 1; pos < content.size(); ++line_number) {
    std::size_t end = content.find_first_of("\r\n", pos);
    std::size_t next = end;
    if (end == std::string::npos) {
      end = next = content.size();
    } else {
      next =
          end +
          ((content[end] == '\r' && end + 1 < content.size() && content[end + 1] == '\n') ? 2 : 1);
    }
    const std::string_view line(content.data() + pos, end - pos);
    pos = next;
    if (const auto error = extractor.extract(line, values)) {
      base::fail(path, ":", line_number, ": ", *error);
    }
    try {
      examples.push_back(lambada_example(values[0], tokenizer, strict));
    } catch (const base::Error& e) {
      base::fail(path, ":", line_number, ": ", e.what());
    }
  }
  if (examples.empty()) base::fail(path, ": no examples (the file is empty)");
  return examples;
}

}  // namespace mds::tasks
