#include "io/line_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace mds::io {
namespace {

using namespace std::string_literals;

// Bytes from memory, at most `chunk` per read, like a pipe that delivers short reads.
class MemorySource final : public ByteSource {
 public:
  MemorySource(std::string data, std::size_t chunk) : data_(std::move(data)), chunk_(chunk) {}
  std::size_t read(char* buffer, std::size_t size) override {
    const std::size_t n = std::min({size, chunk_, data_.size() - offset_});
    std::memcpy(buffer, data_.data() + offset_, n);
    offset_ += n;
    return n;
  }
  std::uint64_t raw_bytes_consumed() const override { return offset_; }

 private:
  std::string data_;
  std::size_t chunk_;
  std::size_t offset_ = 0;
};

struct Split {
  std::vector<std::string> lines;
  std::vector<std::uint64_t> first_line_numbers;
  std::uint64_t input_bytes = 0;
  std::size_t batches = 0;
};

Split split(const std::string& data, std::size_t read_size, std::size_t target_bytes,
            std::size_t chunk = SIZE_MAX) {
  LineReader reader(std::make_unique<MemorySource>(data, chunk), read_size);
  LineBatch batch;
  Split result;
  while (reader.next_batch(batch, target_bytes)) {
    EXPECT_GT(batch.size(), 0u);
    EXPECT_EQ(batch.first_line_number, result.lines.size() + 1);
    result.first_line_numbers.push_back(batch.first_line_number);
    for (std::size_t i = 0; i < batch.size(); ++i) result.lines.emplace_back(batch.line(i));
    result.input_bytes += batch.input_bytes;
    ++result.batches;
  }
  EXPECT_FALSE(reader.next_batch(batch, target_bytes));  // stays at the end
  EXPECT_EQ(reader.raw_bytes_consumed(), data.size());
  return result;
}

// Python's universal newlines, written the obvious way.
std::vector<std::string> reference_split(const std::string& data) {
  std::vector<std::string> lines;
  std::string line;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '\n' || data[i] == '\r') {
      if (data[i] == '\r' && i + 1 < data.size() && data[i + 1] == '\n') ++i;
      lines.push_back(line);
      line.clear();
    } else {
      line.push_back(data[i]);
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

using Lines = std::vector<std::string>;

TEST(LineReader, UniversalNewlines) {
  const std::string data = "{\"text\": \"a\"}\r\n{\"text\": \"b\"}\r{\"text\": \"c\"}\n";
  const Split result = split(data, 1 << 20, 1 << 20);
  EXPECT_EQ(result.lines, (Lines{R"({"text": "a"})", R"({"text": "b"})", R"({"text": "c"})"}));
  EXPECT_EQ(result.input_bytes, data.size());
}

TEST(LineReader, SmallCases) {
  const std::vector<std::pair<std::string, Lines>> cases = {
      {"", {}},
      {"\n", {""}},
      {"\n\n", {"", ""}},
      {"\r", {""}},
      {"\r\r", {"", ""}},
      {"\r\n", {""}},
      {"\r\r\n", {"", ""}},
      {"\n\r", {"", ""}},
      {"a", {"a"}},
      {"a\n", {"a"}},
      {"a\nb", {"a", "b"}},
      {"a\r", {"a"}},
      {"a\r\nb\r\n", {"a", "b"}},
      {"a\n\nb", {"a", "", "b"}},
  };
  for (const auto& [data, expected] : cases) {
    for (std::size_t read_size : {1, 2, 3, 1 << 16}) {
      const Split result = split(data, read_size, 1);
      EXPECT_EQ(result.lines, expected) << "read_size " << read_size;
      EXPECT_EQ(result.input_bytes, data.size());
    }
  }
}

TEST(LineReader, CarriageReturnAtReadBoundary) {
  // read_size 2 puts "\r" at the end of the first read and "\n" at the start of the second.
  EXPECT_EQ(split("a\r\nb", 2, 1).lines, (Lines{"a", "b"}));
  EXPECT_EQ(split("a\r\nb", 2, 100).lines, (Lines{"a", "b"}));
  EXPECT_EQ(split("a\rb", 2, 1).lines, (Lines{"a", "b"}));
  // Short reads from the source have the same effect.
  EXPECT_EQ(split("a\r\nb", 1 << 16, 1, 2).lines, (Lines{"a", "b"}));
  EXPECT_EQ(split("a\r\n\r\nb", 1 << 16, 1, 2).lines, (Lines{"a", "", "b"}));
}

TEST(LineReader, OtherSeparatorsDoNotSplit) {
  // U+2028, U+0085, VT, FF, FS, GS, RS and NUL.
  const std::string line =
      "a\xe2\x80\xa8"
      "b\xc2\x85"
      "c\x0b"
      "d\x0c"
      "e\x1c\x1d\x1e"
      "f\0g"s;
  EXPECT_EQ(split(line + "\n", 3, 1).lines, (Lines{line}));
}

TEST(LineReader, MatchesReferenceOnRandomInputs) {
  std::mt19937 rng(1234);
  const char alphabet[] = {'a', 'b', '\r', '\n', '\r', '\n', 'x', '\0'};
  for (int round = 0; round < 2000; ++round) {
    std::string data(rng() % 64, ' ');
    for (char& c : data) c = alphabet[rng() % sizeof(alphabet)];
    const std::size_t read_size = 1 + rng() % 9;
    const std::size_t target = rng() % 20;
    const std::size_t chunk = 1 + rng() % 9;
    const Split result = split(data, read_size, target, chunk);
    ASSERT_EQ(result.lines, reference_split(data))
        << "round " << round << " read_size " << read_size << " target " << target;
    ASSERT_EQ(result.input_bytes, data.size());
  }
}

TEST(LineReader, BatchesStayNearTarget) {
  std::string data;
  const std::size_t lines = 5000;
  for (std::size_t i = 0; i < lines; ++i) {
    data += "{\"text\": \"" + std::string(i % 200, 'x') + "\"}\n";
  }
  const std::size_t target = 64 << 10;
  LineReader reader(std::make_unique<MemorySource>(data, 4096), 16 << 10);
  LineBatch batch;
  std::uint64_t next_line = 1;
  std::uint64_t bytes = 0;
  std::size_t batches = 0;
  while (reader.next_batch(batch, target)) {
    EXPECT_EQ(batch.first_line_number, next_line);
    next_line += batch.size();
    bytes += batch.input_bytes;
    ++batches;
    // Every batch but the last reaches the target with the line that crosses it.
    if (bytes < data.size()) {
      EXPECT_GE(batch.input_bytes, target);
      EXPECT_LT(batch.input_bytes, target + 256);
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      EXPECT_EQ(batch.line(i).substr(0, 10), "{\"text\": \"");
    }
  }
  EXPECT_EQ(next_line, lines + 1);
  EXPECT_EQ(bytes, data.size());
  EXPECT_GT(batches, data.size() / target - 1);
}

TEST(LineReader, LineLongerThanReadSize) {
  const std::string big(5 << 20, 'x');
  const Split result = split("a\n" + big + "\r\nb", 4096, 1 << 20);
  ASSERT_EQ(result.lines.size(), 3u);
  EXPECT_EQ(result.lines[0], "a");
  EXPECT_EQ(result.lines[1], big);
  EXPECT_EQ(result.lines[2], "b");
  const Split alone = split(big, 1000, 1);
  ASSERT_EQ(alone.lines.size(), 1u);
  EXPECT_EQ(alone.lines[0].size(), big.size());
}

TEST(LineReader, TextHoldsTheInputBytes) {
  const std::string data = "a\r\nbb\rccc\n";
  LineReader reader(std::make_unique<MemorySource>(data, SIZE_MAX), 1 << 10);
  LineBatch batch;
  ASSERT_TRUE(reader.next_batch(batch, 1 << 20));
  EXPECT_EQ(batch.text, data);
  EXPECT_EQ(batch.input_bytes, data.size());
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch.line(1), "bb");
  EXPECT_FALSE(reader.next_batch(batch, 1 << 20));
}

}  // namespace
}  // namespace mds::io
