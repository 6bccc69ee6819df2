#include "io/npy.h"

#include <cstring>
#include <limits>
#include <utility>

#include "base/atomic_file.h"

namespace mds::io {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kPreambleV1 = 10;  // magic, 2 version bytes, u16 header length
constexpr std::size_t kPreambleV2 = 12;  // same with a u32 header length
// numpy aligns the data to 64 bytes so that it can be memory-mapped for any dtype.
constexpr std::size_t kArrayAlign = 64;
// numpy >= 1.23 leaves room in the header for the first axis to grow to this many digits, so that
// appending rows can rewrite the header in place (numpy/lib/format.py GROWTH_AXIS_MAX_DIGITS).
constexpr std::size_t kGrowthAxisMaxDigits = 21;

// Python's repr of a shape tuple: "(30,)", "(22, 2)", "()".
std::string shape_repr(std::span<const std::uint64_t> shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  return text + ")";
}

std::uint32_t read_le(std::string_view bytes, std::size_t offset, std::size_t width) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < width; ++i) {
    value |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

// A reader for the one Python literal numpy writes: a dict of str keys whose values are str, bool
// or a tuple of ints. Whitespace is free between tokens, as for Python's literal_eval.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  NpyHeader parse() {
    NpyHeader header;
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<std::uint64_t>> shape;
    expect('{');
    while (!consume('}')) {
      const std::string key = parse_string("a key");
      expect(':');
      if (key == "descr") {
        descr = parse_string("'descr'");
      } else if (key == "fortran_order") {
        fortran_order = parse_bool();
      } else if (key == "shape") {
        shape = parse_shape();
      } else {
        fail_here("unexpected key '", key, "'");
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) fail_here("text after the closing '}'");
    if (!descr || !fortran_order || !shape) {
      base::fail(name_, ": .npy header lacks '",
                 !descr ? "descr" : (!fortran_order ? "fortran_order" : "shape"), "'");
    }
    if (*fortran_order) base::fail(name_, ": .npy 'fortran_order' is True; only C order is read");
    header.dtype = dtype_from_descr(*descr);
    header.shape = std::move(*shape);
    return header;
  }

 private:
  template <typename... Parts>
  [[noreturn]] void fail_here(const Parts&... parts) {
    base::fail(name_, ": bad .npy header at byte ", pos_, ": ", parts...);
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail_here("expected '", c, "'");
  }

  std::string parse_string(const char* what) {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      fail_here("expected a string for ", what);
    }
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail_here("unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }

  bool parse_bool() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::size_t length = std::strlen(word);
      if (text_.substr(pos_, length) == word) {
        pos_ += length;
        return value;
      }
    }
    fail_here("'fortran_order' must be True or False");
  }

  std::vector<std::uint64_t> parse_shape() {
    std::vector<std::uint64_t> shape;
    expect('(');
    while (!consume(')')) {
      skip_space();
      const std::size_t start = pos_;
      std::uint64_t extent = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        const auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
        if (extent > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
          fail_here("'shape' extent too large");
        }
        extent = extent * 10 + digit;
        ++pos_;
      }
      if (pos_ == start) fail_here("'shape' must be a tuple of non-negative integers");
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 long, in old files
      shape.push_back(extent);
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  NpyDType dtype_from_descr(const std::string& descr) {
    for (const NpyDType dtype : {NpyDType::kInt32, NpyDType::kUInt32, NpyDType::kInt64}) {
      if (descr == npy_descr(dtype)) return dtype;
    }
    if (!descr.empty() && descr[0] == '>') {
      base::fail(name_, ": .npy 'descr' is '", descr, "': big-endian data is not supported");
    }
    base::fail(name_, ": .npy 'descr' is '", descr, "'; expected '<i4', '<u4' or '<i8'");
  }

  std::string_view text_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string_view npy_descr(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::kInt32:
      return "<i4";
    case NpyDType::kUInt32:
      return "<u4";
    case NpyDType::kInt64:
      return "<i8";
  }
  return "?";
}

std::size_t npy_itemsize(NpyDType dtype) {
  return dtype == NpyDType::kInt64 ? 8 : 4;
}

std::uint64_t NpyHeader::num_elements() const {
  std::uint64_t count = 1;
  for (const std::uint64_t extent : shape) count *= extent;
  return count;
}

std::string npy_header(NpyDType dtype, std::span<const std::uint64_t> shape) {
  // numpy/lib/format.py _write_array_header: the dict with sorted keys, then the growth padding.
  std::string dict = base::cat("{'descr': '", npy_descr(dtype),
                               "', 'fortran_order': False, 'shape': ", shape_repr(shape), ", }");
  if (!shape.empty()) {
    const std::size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  // _wrap_header: pad with spaces and end with '\n' so that the data starts 64-byte aligned.
  const auto wrap = [&](std::size_t preamble) {
    const std::size_t unpadded = preamble + dict.size() + 1;
    const std::size_t pad = (kArrayAlign - unpadded % kArrayAlign) % kArrayAlign;
    return dict + std::string(pad, ' ') + "\n";
  };
  std::string text = wrap(kPreambleV1);
  std::string out(kMagic);
  if (text.size() <= std::numeric_limits<std::uint16_t>::max()) {
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(text.size() & 0xFF);
    out += static_cast<char>(text.size() >> 8);
  } else {
    text = wrap(kPreambleV2);
    out += '\x02';
    out += '\x00';
    for (int i = 0; i < 4; ++i) out += static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  }
  return out + text;
}

void save_npy(const std::string& path, NpyDType dtype, std::span<const std::uint64_t> shape,
              const void* data) {
  const std::string header = npy_header(dtype, shape);
  std::uint64_t count = 1;
  for (const std::uint64_t extent : shape) count *= extent;
  base::AtomicFile file(path);
  file.write(header.data(), header.size());
  if (count > 0) file.write(data, count * npy_itemsize(dtype));
  file.commit();
}

NpyHeader parse_npy_header(std::string_view bytes, const std::string& name) {
  if (bytes.size() < kPreambleV1 || bytes.substr(0, kMagic.size()) != kMagic) {
    base::fail(name, ": not a .npy file (bad magic)");
  }
  const auto major = static_cast<unsigned char>(bytes[6]);
  const auto minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    base::fail(name, ": unsupported .npy version ", int(major), ".", int(minor),
               " (1.0, 2.0 and 3.0 are read)");
  }
  const std::size_t preamble = major == 1 ? kPreambleV1 : kPreambleV2;
  if (bytes.size() < preamble) base::fail(name, ": .npy file truncated in its preamble");
  const std::size_t header_length = read_le(bytes, 8, preamble - 8);
  if (bytes.size() - preamble < header_length) {
    base::fail(name, ": .npy header length ", header_length, " exceeds the file size ",
               bytes.size());
  }
  // Version 3.0 only allows UTF-8 in the header; the fields read here are ASCII either way.
  NpyHeader header = HeaderParser(bytes.substr(preamble, header_length), name).parse();
  header.data_offset = preamble + header_length;
  std::uint64_t count = 1;
  for (const std::uint64_t extent : header.shape) {
    if (extent != 0 && count > std::numeric_limits<std::uint64_t>::max() / extent / 8) {
      base::fail(name, ": .npy 'shape' ", shape_repr(header.shape), " is too large");
    }
    count *= extent;
  }
  const std::uint64_t data_bytes = count * npy_itemsize(header.dtype);
  if (bytes.size() - header.data_offset != data_bytes) {
    base::fail(name, ": .npy data is ", bytes.size() - header.data_offset, " bytes, but 'shape' ",
               shape_repr(header.shape), " of '", npy_descr(header.dtype), "' needs ", data_bytes);
  }
  return header;
}

NpyArray::NpyArray(base::MappedFile file, NpyHeader header)
    : file_(std::move(file)), header_(std::move(header)) {
  data_ = file_.data() == nullptr ? nullptr : file_.data() + header_.data_offset;
}

NpyArray NpyArray::load(const std::string& path) {
  base::MappedFile file(path);
  NpyHeader header = parse_npy_header(file.bytes(), path);
  // values() hands out typed spans over the mapping, so the data must be aligned; numpy has
  // always padded headers to 16 or 64 bytes, so only a hand-made file can fail here.
  if (header.data_offset % npy_itemsize(header.dtype) != 0) {
    base::fail(path, ": .npy data offset ", header.data_offset, " is not aligned to its ",
               npy_itemsize(header.dtype), "-byte elements");
  }
  return NpyArray(std::move(file), std::move(header));
}

std::int64_t NpyArray::at(std::uint64_t i) const {
  const unsigned char* item = data_ + i * npy_itemsize(dtype());
  switch (dtype()) {
    case NpyDType::kInt32: {
      std::int32_t value;
      std::memcpy(&value, item, sizeof value);
      return value;
    }
    case NpyDType::kUInt32: {
      std::uint32_t value;
      std::memcpy(&value, item, sizeof value);
      return value;
    }
    case NpyDType::kInt64: {
      std::int64_t value;
      std::memcpy(&value, item, sizeof value);
      return value;
    }
  }
  return 0;
}

}  // namespace mds::io
