#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/input_source.h"

namespace mds::io {

// A run of consecutive whole lines. `text` holds their bytes as read, terminators included, so a
// batch is filled with one copy; spans select each line without its terminator.
struct LineBatch {
  struct Span {
    std::size_t begin = 0;
    std::size_t size = 0;
  };
  std::string text;
  std::vector<Span> spans;
  std::uint64_t first_line_number = 1;  // 1-based number of spans[0] in its input
  std::uint64_t input_bytes = 0;        // bytes these lines occupied, terminators included

  std::size_t size() const { return spans.size(); }
  std::string_view line(std::size_t i) const {
    return {text.data() + spans[i].begin, spans[i].size};
  }
  void clear();
};

// Splits a byte stream into lines like Python's universal-newline text mode: "\n", "\r\n" and a
// lone "\r" each end a line (also across read boundaries); a last line without terminator counts;
// an input ending in a terminator has no extra empty line. No other character ends a line.
class LineReader {
 public:
  explicit LineReader(std::unique_ptr<ByteSource> source, std::size_t read_size = 1 << 20);
  // Replaces `batch` with the next whole lines, about `target_bytes` in total and at least one
  // line (a single line may be arbitrarily long). Returns false at end of input.
  bool next_batch(LineBatch& batch, std::size_t target_bytes);
  std::uint64_t raw_bytes_consumed() const { return source_->raw_bytes_consumed(); }

 private:
  bool fill();
  std::unique_ptr<ByteSource> source_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  bool eof_ = false;
  std::uint64_t next_line_number_ = 1;
  std::size_t read_size_;
};

}  // namespace mds::io
