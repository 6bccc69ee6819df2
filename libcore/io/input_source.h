#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace mds::io {

// A stream of bytes from a file or stdin, decompressed on the fly.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `size` bytes into `buffer`; returns 0 only at the end of the input. Throws
  // base::Error naming the input on I/O or decompression errors (e.g. a truncated .zst).
  virtual std::size_t read(char* buffer, std::size_t size) = 0;
  // Bytes consumed from the underlying file so far (compressed bytes for compressed input).
  virtual std::uint64_t raw_bytes_consumed() const = 0;
};

enum class Compression { kNone, kZstd, kXz, kGzip };
std::string_view compression_name(Compression compression);

struct OpenedInput {
  std::unique_ptr<ByteSource> source;
  Compression compression = Compression::kNone;
  std::optional<std::uint64_t> raw_size;  // size of the file on disk; none for stdin or pipes
  std::string display_name;               // the path, or "<stdin>"
};

// Opens `path` ("-" = stdin). Compression is detected from the first bytes (zstd, xz, gzip magic),
// whatever the file is called; concatenated frames/members/streams are read through.
OpenedInput open_input(const std::string& path);

}  // namespace mds::io
