#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

// The uncompressed ("stored") zip subset PyTorch's .pt files use (checkpoints.md §5.1).
namespace mds::io {

struct ZipEntry {
  std::string name;
  std::uint64_t data_offset = 0;  // of the entry's bytes within the archive
  std::uint64_t size = 0;
  std::uint32_t crc32 = 0;
};

std::uint32_t crc32_of(std::string_view bytes);

// Parses the central directory (ZIP64 aware) of an archive held in memory and locates every
// entry's data. Accepts only stored, unencrypted entries lying inside the archive; fails with
// base::Error naming `source` otherwise.
std::vector<ZipEntry> read_zip_directory(std::string_view archive, std::string_view source);

// Streams a zip the way PyTorch's writer (miniz) lays it out: stored entries whose data starts at a
// multiple of 64 bytes (padding in an "FB" extra field, so storages can be memory-mapped in place),
// local headers without sizes followed by data descriptors, and a ZIP64 end record before the
// classic one. Entries, offsets or sizes reaching `zip64_threshold` get ZIP64 fields (the default
// is the format's limit; tests lower it to exercise the ZIP64 path on small files).
class ZipWriter {
 public:
  using Sink = std::function<void(const char* data, std::size_t size)>;
  static constexpr std::uint64_t kAlignment = 64;

  explicit ZipWriter(Sink sink, std::uint64_t zip64_threshold = 0xFFFFFFFFu);
  void add(const std::string& name, std::string_view data);
  // Writes the central directory and end records; no add() after this.
  void finish();

 private:
  struct Written {
    std::string name;
    std::uint64_t header_offset;
    std::uint64_t size;
    std::uint32_t crc;
  };
  void emit(const std::string& bytes);
  void emit(std::string_view bytes);

  Sink sink_;
  std::uint64_t threshold_;
  std::uint64_t offset_ = 0;
  std::vector<Written> entries_;
  bool finished_ = false;
};

}  // namespace mds::io
