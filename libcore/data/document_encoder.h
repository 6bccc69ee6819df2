#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/json_fields.h"
#include "io/line_reader.h"
#include "text/tokenizer.h"

namespace mds::data {

struct LineFailure {
  std::uint64_t line_number = 0;
  std::string reason;
};

// Token ids of a run of input lines, one document per line and key, ready to append in order.
struct EncodedBatch {
  struct KeyDocuments {
    std::vector<std::int32_t> tokens;  // all documents of the batch, concatenated
    std::vector<std::int32_t> sizes;   // tokens per document; empty documents are absent
  };
  std::vector<KeyDocuments> keys;  // parallel to the --json-keys
  std::uint64_t lines = 0;         // lines read, including failed and skipped ones
  std::uint64_t input_bytes = 0;
  std::uint64_t skipped = 0;
  std::optional<LineFailure> first_failure;  // without skipping, the batch stops here
};

// Turns JSON lines into documents as upstream preprocess_data.py does (data.md §2.2): each line is
// a JSON object; each key's text becomes one document, with EOD appended if asked; a text with no
// tokens produces no document. A line that is not valid UTF-8, not valid JSON, blank, or lacks a
// key stops the batch at that line, or, when skipping, is left out entirely (for every key).
// One encoder per worker thread.
class DocumentEncoder {
 public:
  DocumentEncoder(const text::Tokenizer& tokenizer, std::vector<std::string> keys, bool append_eod,
                  bool skip_invalid_lines);

  EncodedBatch encode(const io::LineBatch& batch);

 private:
  std::optional<std::string> encode_line(std::string_view line, EncodedBatch& out);

  std::unique_ptr<text::Encoder> encoder_;
  io::JsonFieldExtractor extractor_;
  std::optional<std::int32_t> eod_;
  bool skip_invalid_lines_;
  std::vector<std::string> values_;
  std::vector<std::vector<std::int32_t>> line_tokens_;
};

}  // namespace mds::data
