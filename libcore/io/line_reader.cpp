#include "io/line_reader.h"

#include <algorithm>
#include <cstring>

#include "io/byte_scan.h"

namespace mds::io {

void LineBatch::clear() {
  text.clear();
  spans.clear();
  first_line_number = 1;
  input_bytes = 0;
}

LineReader::LineReader(std::unique_ptr<ByteSource> source, std::size_t read_size)
    : source_(std::move(source)), read_size_(std::max<std::size_t>(read_size, 1)) {}

// One read from the source. Unconsumed bytes move to the front only when the free tail is too
// small, so in the steady state a batch is copied once (into LineBatch::text) and never moved.
bool LineReader::fill() {
  if (eof_) return false;
  if (buffer_.size() - end_ < read_size_) {
    if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buffer_.size() - end_ < read_size_) {
      buffer_.resize(std::max(buffer_.size() * 2, end_ + read_size_));
    }
  }
  const std::size_t n = source_->read(buffer_.data() + end_, read_size_);
  if (n == 0) {
    eof_ = true;
    return false;
  }
  end_ += n;
  return true;
}

bool LineReader::next_batch(LineBatch& batch, std::size_t target_bytes) {
  batch.clear();
  batch.first_line_number = next_line_number_;
  while (end_ - begin_ < target_bytes && fill()) {
  }
  // Offsets are relative to begin_ because fill() may move the buffered bytes.
  std::size_t scan = 0;
  std::size_t line_start = 0;
  while (true) {
    const auto* base = reinterpret_cast<const unsigned char*>(buffer_.data()) + begin_;
    const std::size_t available = end_ - begin_;
    const std::size_t i =
        static_cast<std::size_t>(scan::find_newline(base + scan, base + available) - base);
    if (i == available) {
      if (fill()) {
        scan = i;
        continue;
      }
      if (line_start < available) {
        batch.spans.push_back({line_start, available - line_start});
        line_start = available;
      }
      break;
    }
    std::size_t terminator = 1;
    if (base[i] == '\r') {
      if (i + 1 == available) {
        // "\r\n" split by a read is one terminator: look at the next byte before deciding.
        if (fill()) {
          scan = i;
          continue;
        }
      } else if (base[i + 1] == '\n') {
        terminator = 2;
      }
    }
    batch.spans.push_back({line_start, i - line_start});
    line_start = i + terminator;
    scan = line_start;
    if (line_start >= target_bytes) break;
  }
  if (batch.spans.empty()) return false;
  batch.text.assign(buffer_.data() + begin_, line_start);
  batch.input_bytes = line_start;
  next_line_number_ += batch.spans.size();
  begin_ += line_start;
  if (begin_ == end_) begin_ = end_ = 0;
  return true;
}

}  // namespace mds::io
