// Fuzzes the input side of preprocess: bytes -> LineReader -> UTF-8 check -> JsonFieldExtractor.
// The first two input bytes choose the read size and the batch target, so that line terminators
// land on every kind of read boundary; the rest is the JSONL text.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/json_fields.h"
#include "io/line_reader.h"
#include "text/utf8.h"

namespace {

// Bytes from memory, in reads of at most `chunk` bytes (a pipe's short reads).
class MemorySource final : public mds::io::ByteSource {
 public:
  MemorySource(std::string_view data, std::size_t chunk) : data_(data), chunk_(chunk) {}
  std::size_t read(char* buffer, std::size_t size) override {
    std::size_t n = std::min(size, std::min(chunk_, data_.size() - offset_));
    std::memcpy(buffer, data_.data() + offset_, n);
    offset_ += n;
    return n;
  }
  std::uint64_t raw_bytes_consumed() const override { return offset_; }

 private:
  std::string_view data_;
  std::size_t chunk_;
  std::size_t offset_ = 0;
};

void check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

// The input as Python's universal newlines hand it to json.loads line by line: every terminator
// becomes "\n", and a last line without one gets none.
std::string normalise(std::string_view data) {
  std::string out;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < data.size() && data[i + 1] == '\n') ++i;
    } else {
      out.push_back(data[i]);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t read_size = 1 + data[0] % 32;
  const std::size_t target = data[1] % 128;
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  mds::io::LineReader reader(std::make_unique<MemorySource>(input, 1 + data[0] / 32), read_size);
  static mds::io::JsonFieldExtractor extractor({"text"});
  static mds::io::JsonFieldExtractor two_keys({"text", "meta"});
  std::vector<std::string> values;
  mds::io::LineBatch batch;
  std::string text;      // batches' raw bytes, concatenated
  std::string rejoined;  // lines with "\n" after each
  std::uint64_t next_line = 1;
  std::uint64_t bytes = 0;
  while (reader.next_batch(batch, target)) {
    check(batch.size() > 0, "empty batch");
    check(batch.first_line_number == next_line, "line numbers continue across batches");
    check(batch.input_bytes == batch.text.size(), "input_bytes counts the batch's bytes");
    next_line += batch.size();
    bytes += batch.input_bytes;
    text += batch.text;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const std::string_view line = batch.line(i);
      check(line.find_first_of("\r\n") == std::string_view::npos, "terminator inside a line");
      rejoined.append(line);
      rejoined.push_back('\n');
      const bool valid_utf8 = !mds::text::find_invalid_utf8(line).has_value();
      for (auto* json : {&extractor, &two_keys}) {
        const auto error = json->extract(line, values);
        if (error) {
          check(error->find('\n') == std::string::npos, "one-line failure reason");
          continue;
        }
        check(values.size() == json->keys().size(), "one value per key");
        if (!valid_utf8) continue;
        for (const std::string& value : values) {
          check(!mds::text::find_invalid_utf8(value).has_value(), "extracted value is UTF-8");
        }
      }
    }
  }
  check(bytes == input.size(), "every byte belongs to a batch");
  check(text == input, "batches hold the input bytes in order");
  std::string expected = normalise(input);
  if (!expected.empty() && expected.back() != '\n') expected.push_back('\n');
  check(rejoined == expected, "lines rejoined reproduce the input");
  return 0;
}
