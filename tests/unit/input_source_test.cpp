#include "io/input_source.h"

#include <gtest/gtest.h>
#include <lzma.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "test_support.h"

namespace mds::io {
namespace {

using testing_support::ScratchDir;
using testing_support::write_file;

// JSON lines of random letters: they compress to about 60%, so a few MiB need several refills of
// the decoders' 1 MiB input buffer as well as of the output.
std::string sample_text(std::size_t size, unsigned seed = 7) {
  std::mt19937 rng(seed);
  std::string text;
  text.reserve(size + 128);
  while (text.size() < size) {
    text += "{\"text\": \"";
    for (std::size_t i = 0, n = rng() % 100; i < n; ++i)
      text.push_back(static_cast<char>('a' + rng() % 26));
    text += "\"}\n";
  }
  text.resize(size);
  return text;
}

std::string zstd_compress(const std::string& data, int level = 3) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const std::size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string xz_compress(const std::string& data) {
  std::string out(lzma_stream_buffer_bound(data.size()), '\0');
  std::size_t position = 0;
  const lzma_ret ret = lzma_easy_buffer_encode(
      1, LZMA_CHECK_CRC64, nullptr, reinterpret_cast<const std::uint8_t*>(data.data()), data.size(),
      reinterpret_cast<std::uint8_t*>(out.data()), &position, out.size());
  EXPECT_EQ(ret, LZMA_OK);
  out.resize(position);
  return out;
}

std::string gzip_compress(const std::string& data) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&stream, data.size()) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

class InputSource : public testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_.file(name);
    write_file(path, bytes);
    return path;
  }

  ScratchDir dir_;
};

// Everything the source yields, read `chunk` bytes at a time.
std::string read_all(ByteSource& source, std::size_t chunk = 1 << 16) {
  std::string out;
  std::vector<char> buffer(chunk);
  while (const std::size_t n = source.read(buffer.data(), buffer.size()))
    out.append(buffer.data(), n);
  EXPECT_EQ(source.read(buffer.data(), buffer.size()), 0u);  // the end is sticky
  return out;
}

// Expects reading `path` to fail with a message that names it and contains `what`.
void expect_read_error(const std::string& path, const std::string& what) {
  try {
    OpenedInput input = open_input(path);
    read_all(*input.source);
    ADD_FAILURE() << "no error reading " << path;
  } catch (const base::Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(what), std::string::npos) << message;
  }
}

TEST_F(InputSource, PlainFile) {
  const std::string text = sample_text(3 << 20);
  const std::string path = write("data.jsonl", text);
  OpenedInput input = open_input(path);
  EXPECT_EQ(input.compression, Compression::kNone);
  EXPECT_EQ(input.raw_size, text.size());
  EXPECT_EQ(input.display_name, path);
  EXPECT_EQ(read_all(*input.source, 1000), text);
  EXPECT_EQ(input.source->raw_bytes_consumed(), text.size());
}

TEST_F(InputSource, EmptyAndTinyFiles) {
  for (const std::string content : {"", "x", "\x1f", "\x28\xb5\x2f"}) {
    OpenedInput input = open_input(write("tiny", content));
    EXPECT_EQ(input.compression, Compression::kNone);
    EXPECT_EQ(read_all(*input.source, 1), content);
  }
}

TEST_F(InputSource, EveryCodecWithConcatenatedParts) {
  const std::string first = sample_text(2 << 20, 1);
  const std::string second = sample_text(100000, 2);
  struct Case {
    Compression compression;
    std::string bytes;
  };
  const std::vector<Case> cases = {
      {Compression::kZstd, zstd_compress(first) + zstd_compress("") + zstd_compress(second)},
      // xz allows stream padding (zero bytes in fours) between streams.
      {Compression::kXz, xz_compress(first) + std::string(4, '\0') + xz_compress(second)},
      {Compression::kGzip, gzip_compress(first) + gzip_compress("") + gzip_compress(second)},
  };
  for (const Case& item : cases) {
    SCOPED_TRACE(std::string(compression_name(item.compression)));
    EXPECT_GT(item.bytes.size(), std::size_t{1} << 20);  // more than one refill of the input
    const std::string path = write("data.jsonl", item.bytes);
    for (const std::size_t chunk : {std::size_t{1} << 20, std::size_t{4093}}) {
      OpenedInput input = open_input(path);
      EXPECT_EQ(input.compression, item.compression);
      EXPECT_EQ(input.raw_size, item.bytes.size());
      const std::string out = read_all(*input.source, chunk);
      EXPECT_EQ(out.size(), first.size() + second.size());
      EXPECT_TRUE(out == first + second);
      EXPECT_EQ(input.source->raw_bytes_consumed(), item.bytes.size());
    }
  }
}

TEST_F(InputSource, EmptyCompressedStreams) {
  for (const auto& [compression, bytes] : {std::pair{Compression::kZstd, zstd_compress("")},
                                           std::pair{Compression::kXz, xz_compress("")},
                                           std::pair{Compression::kGzip, gzip_compress("")}}) {
    OpenedInput input = open_input(write("empty", bytes));
    EXPECT_EQ(input.compression, compression);
    EXPECT_EQ(read_all(*input.source), "");
  }
}

TEST_F(InputSource, DetectionIgnoresTheName) {
  const std::string text = sample_text(5000);
  OpenedInput zstd = open_input(write("looks_plain.jsonl", zstd_compress(text)));
  EXPECT_EQ(zstd.compression, Compression::kZstd);
  EXPECT_EQ(read_all(*zstd.source), text);
  OpenedInput gzip = open_input(write("data.xz", gzip_compress(text)));
  EXPECT_EQ(gzip.compression, Compression::kGzip);
  EXPECT_EQ(read_all(*gzip.source), text);
  OpenedInput plain = open_input(write("data.jsonl.zst", text));
  EXPECT_EQ(plain.compression, Compression::kNone);
  EXPECT_EQ(read_all(*plain.source), text);
}

TEST_F(InputSource, TruncatedStreamsFailNamingTheInput) {
  const std::string text = sample_text(200000);
  const std::string zstd = zstd_compress(text);
  const std::string xz = xz_compress(text);
  const std::string gzip = gzip_compress(text);
  for (const std::size_t cut : {std::size_t{1}, std::size_t{7}, zstd.size() / 2}) {
    expect_read_error(write("data.jsonl.zst", zstd.substr(0, zstd.size() - cut)),
                      "truncated zstd stream");
  }
  // A second frame cut short after a complete first one.
  expect_read_error(write("two.zst", zstd + zstd.substr(0, 100)), "truncated zstd stream");
  for (const std::size_t cut : {std::size_t{1}, std::size_t{7}, xz.size() / 2}) {
    expect_read_error(write("data.jsonl.xz", xz.substr(0, xz.size() - cut)), "truncated xz stream");
  }
  for (const std::size_t cut : {std::size_t{1}, std::size_t{7}, gzip.size() / 2}) {
    expect_read_error(write("data.jsonl.gz", gzip.substr(0, gzip.size() - cut)),
                      "truncated gzip stream");
  }
  expect_read_error(write("magic_only.zst", "\x28\xb5\x2f\xfd"), "truncated zstd stream");
  expect_read_error(write("magic_only.gz", "\x1f\x8b"), "truncated gzip stream");
}

TEST_F(InputSource, CorruptStreamsFailNamingTheInput) {
  const std::string text = sample_text(20000);
  const std::string garbage = "garbage after the last frame";
  expect_read_error(write("garbage.zst", zstd_compress(text) + garbage), "corrupt zstd stream");
  expect_read_error(write("garbage.xz", xz_compress(text) + garbage), "corrupt xz stream");
  expect_read_error(write("garbage.gz", gzip_compress(text) + garbage), "corrupt gzip stream");
  // Damage inside the data: the gzip CRC and the xz check catch it.
  std::string gzip = gzip_compress(text);
  gzip[gzip.size() / 2] = static_cast<char>(gzip[gzip.size() / 2] ^ 0x55);
  expect_read_error(write("flipped.gz", gzip), "corrupt gzip stream");
  std::string xz = xz_compress(text);
  xz[xz.size() / 2] = static_cast<char>(xz[xz.size() / 2] ^ 0x55);
  expect_read_error(write("flipped.xz", xz), "corrupt xz stream");
}

TEST_F(InputSource, OpenErrorsNameThePath) {
  const std::string missing = dir_.file("missing.jsonl");
  try {
    open_input(missing);
    ADD_FAILURE() << "opened a missing file";
  } catch (const base::Error& error) {
    EXPECT_NE(std::string(error.what()).find(missing), std::string::npos) << error.what();
  }
  try {
    open_input(dir_.path().string());
    ADD_FAILURE() << "opened a directory";
  } catch (const base::Error& error) {
    EXPECT_NE(std::string(error.what()).find("directory"), std::string::npos) << error.what();
  }
}

// Runs open_input("-") with a pipe on file descriptor 0 whose writer delivers `bytes` in small,
// delayed pieces, so that even the detection of the magic bytes sees short reads.
OpenedInput read_stdin(const std::string& bytes, std::string& out) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const int saved_stdin = ::dup(STDIN_FILENO);
  ::dup2(fds[0], STDIN_FILENO);
  ::close(fds[0]);
  std::thread writer([&bytes, fd = fds[1]] {
    std::size_t offset = 0;
    std::size_t piece = 1;
    while (offset < bytes.size()) {
      const std::size_t n = std::min(piece, bytes.size() - offset);
      const ssize_t written = ::write(fd, bytes.data() + offset, n);
      if (written <= 0) break;
      offset += static_cast<std::size_t>(written);
      piece = std::min<std::size_t>(piece * 4, 1 << 16);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ::close(fd);
  });
  OpenedInput input;
  try {
    input = open_input("-");
    out = read_all(*input.source, 777);
  } catch (...) {
    writer.join();
    ::dup2(saved_stdin, STDIN_FILENO);
    ::close(saved_stdin);
    throw;
  }
  writer.join();
  ::dup2(saved_stdin, STDIN_FILENO);
  ::close(saved_stdin);
  return input;
}

TEST_F(InputSource, StandardInput) {
  const std::string text = sample_text(300000);
  std::string out;
  OpenedInput plain = read_stdin(text, out);
  EXPECT_EQ(plain.display_name, "<stdin>");
  EXPECT_EQ(plain.compression, Compression::kNone);
  EXPECT_EQ(plain.raw_size, std::nullopt);
  EXPECT_TRUE(out == text);
  OpenedInput zstd = read_stdin(zstd_compress(text) + zstd_compress(text), out);
  EXPECT_EQ(zstd.compression, Compression::kZstd);
  EXPECT_TRUE(out == text + text);
  OpenedInput xz = read_stdin(xz_compress(text), out);
  EXPECT_EQ(xz.compression, Compression::kXz);
  EXPECT_TRUE(out == text);
  OpenedInput gzip = read_stdin(gzip_compress(text), out);
  EXPECT_EQ(gzip.compression, Compression::kGzip);
  EXPECT_TRUE(out == text);
  OpenedInput empty = read_stdin("", out);
  EXPECT_EQ(empty.compression, Compression::kNone);
  EXPECT_EQ(out, "");
  try {
    read_stdin(gzip_compress(text).substr(0, 1000), out);
    ADD_FAILURE() << "no error on truncated gzip from stdin";
  } catch (const base::Error& error) {
    EXPECT_STREQ(error.what(), "<stdin>: truncated gzip stream");
  }
}

}  // namespace
}  // namespace mds::io
