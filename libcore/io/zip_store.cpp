#include "io/zip_store.h"

#include <zlib.h>

#include <algorithm>
#include <set>

#include "base/error.h"

namespace mds::io {

namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kDescriptorSig = 0x08074b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kEnd64Sig = 0x06064b50;
constexpr std::uint32_t kLocator64Sig = 0x07064b50;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint16_t kPaddingExtraId = 0x4246;  // "FB", PyTorch's alignment padding
// Bit 3: sizes in a data descriptor; bit 11: UTF-8 names (what PyTorch writes).
constexpr std::uint16_t kFlags = 0x0808;
constexpr std::uint32_t kMax32 = 0xFFFFFFFFu;

void put16(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 2; ++i) out += static_cast<char>(v >> (8 * i) & 0xFF);
}
void put32(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>(v >> (8 * i) & 0xFF);
}
void put64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (8 * i) & 0xFF);
}

// Bounds-checked little-endian reads from the archive.
class Cursor {
 public:
  Cursor(std::string_view bytes, std::string_view source) : bytes_(bytes), source_(source) {}

  void need(std::uint64_t offset, std::uint64_t size, const char* what) const {
    if (offset > bytes_.size() || size > bytes_.size() - offset) {
      base::fail(source_, ": corrupt zip: ", what, " at offset ", offset,
                 " runs past the end of the file");
    }
  }
  std::uint64_t le(std::uint64_t offset, int n) const {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) {
      v |= std::uint64_t{static_cast<unsigned char>(bytes_[offset + static_cast<std::uint64_t>(i)])}
           << (8 * i);
    }
    return v;
  }
  std::string_view view(std::uint64_t offset, std::uint64_t size) const {
    return bytes_.substr(offset, size);
  }
  std::uint64_t size() const { return bytes_.size(); }
  std::string_view source() const { return source_; }

 private:
  std::string_view bytes_;
  std::string_view source_;
};

struct EndRecord {
  std::uint64_t entries = 0;
  std::uint64_t directory_size = 0;
  std::uint64_t directory_offset = 0;
  std::uint64_t end = 0;  // where the directory must end (start of the end records)
};

EndRecord find_end(const Cursor& in) {
  if (in.size() < 22) base::fail(in.source(), ": not a zip archive (too short)");
  // The classic end record is the last 22 bytes plus a comment of at most 65535 bytes.
  const std::uint64_t lowest = in.size() > 22 + 0xFFFF ? in.size() - 22 - 0xFFFF : 0;
  for (std::uint64_t pos = in.size() - 22 + 1; pos-- > lowest;) {
    if (in.le(pos, 4) != kEndSig || pos + 22 + in.le(pos + 20, 2) != in.size()) continue;
    EndRecord end{in.le(pos + 10, 2), in.le(pos + 12, 4), in.le(pos + 16, 4), pos};
    if (pos >= 20 && in.le(pos - 20, 4) == kLocator64Sig) {
      const std::uint64_t at = in.le(pos - 20 + 8, 8);
      in.need(at, 56, "ZIP64 end record");
      if (in.le(at, 4) != kEnd64Sig) base::fail(in.source(), ": corrupt zip: bad ZIP64 end record");
      end = EndRecord{in.le(at + 32, 8), in.le(at + 40, 8), in.le(at + 48, 8), at};
    }
    return end;
  }
  base::fail(in.source(), ": not a zip archive (no end of central directory record)");
}

}  // namespace

std::uint32_t crc32_of(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // crc32_z takes a size_t length, so multi-GB storages need no chunking.
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  return static_cast<std::uint32_t>(crc);
}

std::vector<ZipEntry> read_zip_directory(std::string_view archive, std::string_view source) {
  const Cursor in(archive, source);
  const EndRecord end = find_end(in);
  if (end.directory_offset > end.end || end.directory_size > end.end - end.directory_offset) {
    base::fail(source, ": corrupt zip: central directory lies outside the file");
  }
  if (end.entries > end.directory_size / 46)
    base::fail(source, ": corrupt zip: entry count too large");
  std::vector<ZipEntry> entries;
  std::set<std::string> names;
  std::uint64_t pos = end.directory_offset;
  const std::uint64_t directory_end = end.directory_offset + end.directory_size;
  for (std::uint64_t i = 0; i < end.entries; ++i) {
    if (pos + 46 > directory_end || in.le(pos, 4) != kCentralSig) {
      base::fail(source, ": corrupt zip: bad central directory entry ", i);
    }
    const auto flags = in.le(pos + 8, 2);
    const auto method = in.le(pos + 10, 2);
    ZipEntry entry;
    entry.crc32 = static_cast<std::uint32_t>(in.le(pos + 16, 4));
    std::uint64_t packed = in.le(pos + 20, 4);
    entry.size = in.le(pos + 24, 4);
    const auto name_len = in.le(pos + 28, 2);
    const auto extra_len = in.le(pos + 30, 2);
    const auto comment_len = in.le(pos + 32, 2);
    std::uint64_t header = in.le(pos + 42, 4);
    const std::uint64_t record_end = pos + 46 + name_len + extra_len + comment_len;
    if (record_end > directory_end)
      base::fail(source, ": corrupt zip: central entry ", i, " overruns the directory");
    entry.name = std::string(in.view(pos + 46, name_len));
    // ZIP64 extra: the 8-byte values of exactly the fields set to 0xFFFFFFFF, in this order.
    for (std::uint64_t x = pos + 46 + name_len; x + 4 <= pos + 46 + name_len + extra_len;) {
      const auto id = in.le(x, 2);
      const auto len = in.le(x + 2, 2);
      if (x + 4 + len > pos + 46 + name_len + extra_len) break;
      if (id == kZip64ExtraId) {
        std::uint64_t field = x + 4;
        for (std::uint64_t* target : {&entry.size, &packed, &header}) {
          if (*target != kMax32) continue;
          if (field + 8 > x + 4 + len)
            base::fail(source, ": corrupt zip: short ZIP64 field in ", entry.name);
          *target = in.le(field, 8);
          field += 8;
        }
      }
      x += 4 + len;
    }
    if (flags & 1) base::fail(source, ": ", entry.name, " is encrypted");
    if (method != 0) {
      base::fail(source, ": ", entry.name, " is compressed (method ", method,
                 "); only stored entries are supported (torch.save never compresses)");
    }
    if (packed != entry.size)
      base::fail(source, ": corrupt zip: stored entry ", entry.name, " has two sizes");
    in.need(header, 30, "local header");
    if (in.le(header, 4) != kLocalSig)
      base::fail(source, ": corrupt zip: bad local header for ", entry.name);
    entry.data_offset = header + 30 + in.le(header + 26, 2) + in.le(header + 28, 2);
    in.need(entry.data_offset, entry.size, "entry data");
    if (!names.insert(entry.name).second) base::fail(source, ": zip holds ", entry.name, " twice");
    entries.push_back(std::move(entry));
    pos = record_end;
  }
  return entries;
}

ZipWriter::ZipWriter(Sink sink, std::uint64_t zip64_threshold)
    : sink_(std::move(sink)), threshold_(std::min<std::uint64_t>(zip64_threshold, kMax32)) {}

void ZipWriter::emit(const std::string& bytes) {
  emit(std::string_view(bytes));
}

void ZipWriter::emit(std::string_view bytes) {
  sink_(bytes.data(), bytes.size());
  offset_ += bytes.size();
}

void ZipWriter::add(const std::string& name, std::string_view data) {
  if (finished_) base::fail("zip: add after finish");
  if (name.size() > 0xFFFF) base::fail("zip: entry name too long: ", name.substr(0, 64), "...");
  const bool zip64 = data.size() >= threshold_;
  std::string header;
  put32(header, kLocalSig);
  put16(header, zip64 ? 45 : 0);
  put16(header, kFlags);
  for (int i = 0; i < 5; ++i) put16(header, 0);  // method, time, date, crc (2 halves)
  put32(header, 0);                              // compressed size
  put32(header, 0);                              // uncompressed size
  std::string extra;
  if (zip64) {  // announces 8-byte sizes in the data descriptor
    put16(extra, kZip64ExtraId);
    put16(extra, 16);
    put64(extra, 0);
    put64(extra, 0);
  }
  const std::uint64_t before_padding = offset_ + header.size() + 4 + name.size() + extra.size() + 4;
  const std::uint64_t padding = (kAlignment - before_padding % kAlignment) % kAlignment;
  put16(extra, kPaddingExtraId);
  put16(extra, padding);
  extra.append(padding, 'Z');
  put16(header, name.size());
  put16(header, extra.size());
  header += name;
  header += extra;

  Written written{name, offset_, data.size(), crc32_of(data)};
  emit(header);
  emit(data);
  std::string descriptor;
  put32(descriptor, kDescriptorSig);
  put32(descriptor, written.crc);
  if (zip64) {
    put64(descriptor, data.size());
    put64(descriptor, data.size());
  } else {
    put32(descriptor, data.size());
    put32(descriptor, data.size());
  }
  emit(descriptor);
  entries_.push_back(std::move(written));
}

void ZipWriter::finish() {
  if (finished_) return;
  finished_ = true;
  const std::uint64_t directory_offset = offset_;
  for (const auto& e : entries_) {
    const bool zip64 = e.size >= threshold_ || e.header_offset >= threshold_;
    std::string record;
    put32(record, kCentralSig);
    put16(record, 0);  // version made by (as PyTorch)
    put16(record, zip64 ? 45 : 0);
    put16(record, kFlags);
    put16(record, 0);  // method: stored
    put16(record, 0);  // time
    put16(record, 0);  // date
    put32(record, e.crc);
    put32(record, zip64 ? kMax32 : e.size);
    put32(record, zip64 ? kMax32 : e.size);
    put16(record, e.name.size());
    put16(record, zip64 ? 28 : 0);
    put16(record, 0);  // comment
    put16(record, 0);  // disk
    put16(record, 0);  // internal attributes
    put32(record, 0);  // external attributes
    put32(record, zip64 ? kMax32 : e.header_offset);
    record += e.name;
    if (zip64) {
      put16(record, kZip64ExtraId);
      put16(record, 24);
      put64(record, e.size);
      put64(record, e.size);
      put64(record, e.header_offset);
    }
    emit(record);
  }
  const std::uint64_t directory_size = offset_ - directory_offset;
  const std::uint64_t end64_offset = offset_;
  const std::uint64_t count = entries_.size();
  std::string end;
  put32(end, kEnd64Sig);
  put64(end, 44);
  put16(end, 0x031e);  // made by: Unix, 3.0 (as miniz)
  put16(end, 45);      // needed: 4.5, ZIP64
  put32(end, 0);
  put32(end, 0);
  put64(end, count);
  put64(end, count);
  put64(end, directory_size);
  put64(end, directory_offset);
  put32(end, kLocator64Sig);
  put32(end, 0);
  put64(end, end64_offset);
  put32(end, 1);
  put32(end, kEndSig);
  put16(end, 0);
  put16(end, 0);
  put16(end, std::min<std::uint64_t>(count, 0xFFFF));
  put16(end, std::min<std::uint64_t>(count, 0xFFFF));
  put32(end, directory_size >= threshold_ ? kMax32 : directory_size);
  put32(end, directory_offset >= threshold_ ? kMax32 : directory_offset);
  put16(end, 0);
  emit(end);
}

}  // namespace mds::io
