#include "data/document_encoder.h"

#include "base/error.h"
#include "text/utf8.h"

namespace mds::data {
namespace {

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

DocumentEncoder::DocumentEncoder(const text::Tokenizer& tokenizer, std::vector<std::string> keys,
                                 bool append_eod, bool skip_invalid_lines)
    : encoder_(tokenizer.make_encoder()),
      extractor_(std::move(keys)),
      skip_invalid_lines_(skip_invalid_lines),
      line_tokens_(extractor_.keys().size()) {
  if (append_eod) {
    eod_ = tokenizer.eod();
    if (!eod_) {
      base::fail("--append-eod: the ", tokenizer.type_name(),
                 " tokenizer has no end-of-document token");
    }
  }
}

// Returns the reason when the line must be rejected; nothing is added to `out` then.
std::optional<std::string> DocumentEncoder::encode_line(std::string_view line, EncodedBatch& out) {
  if (is_blank(line)) return std::string("blank line (not a JSON object)");
  if (const auto bad = text::find_invalid_utf8(line)) {
    return base::cat("invalid UTF-8 at byte ", *bad);
  }
  if (auto failure = extractor_.extract(line, values_)) return failure;
  for (std::size_t k = 0; k < values_.size(); ++k) {
    std::vector<std::int32_t>& tokens = line_tokens_[k];
    tokens.clear();
    encoder_->encode(values_[k], tokens);
  }
  for (std::size_t k = 0; k < values_.size(); ++k) {
    std::vector<std::int32_t>& tokens = line_tokens_[k];
    if (tokens.empty()) continue;  // upstream drops empty documents, even with --append-eod
    if (eod_) tokens.push_back(*eod_);
    EncodedBatch::KeyDocuments& documents = out.keys[k];
    documents.tokens.insert(documents.tokens.end(), tokens.begin(), tokens.end());
    documents.sizes.push_back(static_cast<std::int32_t>(tokens.size()));
  }
  return std::nullopt;
}

EncodedBatch DocumentEncoder::encode(const io::LineBatch& batch) {
  EncodedBatch out;
  out.keys.resize(extractor_.keys().size());
  out.input_bytes = batch.input_bytes;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    ++out.lines;
    std::optional<std::string> failure = encode_line(batch.line(i), out);
    if (!failure) continue;
    if (!out.first_failure) out.first_failure = LineFailure{batch.first_line_number + i, *failure};
    if (!skip_invalid_lines_) break;
    ++out.skipped;
  }
  return out;
}

}  // namespace mds::data
