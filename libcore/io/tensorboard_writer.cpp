#include "io/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

#include "base/error.h"
#include "io/crc32c.h"

namespace mds::io {
namespace {

// Protocol-buffer wire format, just what Event needs.
enum Wire : std::uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// Field numbers of tensorflow/core/util/event.proto and
// framework/{summary,tensor,tensor_shape}.proto.
constexpr std::uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3,
                        kEventSummary = 5;
constexpr std::uint32_t kSummaryValue = 1;
constexpr std::uint32_t kValueTag = 1, kValueSimpleValue = 2, kValueTensor = 8, kValueMetadata = 9;
constexpr std::uint32_t kMetadataPluginData = 1, kPluginName = 1;
constexpr std::uint32_t kTensorDtype = 1, kTensorShape = 2, kTensorFloatVal = 5,
                        kTensorStringVal = 8;
constexpr std::uint32_t kShapeDim = 2, kDimSize = 1;
constexpr std::uint64_t kDtFloat = 1, kDtString = 7;  // tensorflow DataType

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void put_key(std::string& out, std::uint32_t field, Wire wire) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | wire);
}

void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_uint(std::string& out, std::uint32_t field, std::uint64_t value) {
  put_key(out, field, kVarint);
  put_varint(out, value);
}

std::uint64_t bits_of(double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

std::uint32_t bits_of(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Event{wall_time, step, summary{value{...}}}; zero wall_time and step are left out (proto3).
std::string event_with_value(double wall_time, std::int64_t step, std::string_view value) {
  std::string summary;
  put_bytes(summary, kSummaryValue, value);
  std::string event;
  if (bits_of(wall_time) != 0) {
    put_key(event, kEventWallTime, kFixed64);
    put_le(event, bits_of(wall_time), 8);
  }
  if (step != 0) put_uint(event, kEventStep, static_cast<std::uint64_t>(step));
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::string plugin_metadata(std::string_view plugin) {
  std::string plugin_data;
  put_bytes(plugin_data, kPluginName, plugin);
  std::string metadata;
  put_bytes(metadata, kMetadataPluginData, plugin_data);
  return metadata;
}

// A double as the float TensorBoard keeps; out-of-range values become infinities (a plain cast
// would be undefined behaviour).
float to_float32(double value) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (value > kMax) return std::numeric_limits<float>::infinity();
  if (value < -kMax) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(value);
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace

std::string tfrecord_frame(std::string_view data) {
  std::string length;
  put_le(length, data.size(), 8);
  std::string record = length;
  put_le(record, masked_crc32c(length), 4);
  record.append(data);
  put_le(record, masked_crc32c(data), 4);
  return record;
}

std::string encode_file_version_event(double wall_time) {
  std::string event;
  if (bits_of(wall_time) != 0) {
    put_key(event, kEventWallTime, kFixed64);
    put_le(event, bits_of(wall_time), 8);
  }
  put_bytes(event, kEventFileVersion, "brain.Event:2");
  return event;
}

std::string encode_scalar_event(double wall_time, std::int64_t step, std::string_view tag,
                                float value, ScalarStyle style) {
  std::string summary_value;
  if (!tag.empty()) put_bytes(summary_value, kValueTag, tag);
  if (style == ScalarStyle::kSimpleValue) {
    // simple_value is a member of the oneof `value`, so it is written even when 0.
    put_key(summary_value, kValueSimpleValue, kFixed32);
    put_le(summary_value, bits_of(value), 4);
  } else {
    std::string tensor;
    put_uint(tensor, kTensorDtype, kDtFloat);
    std::string packed;  // repeated float float_val is packed; a repeated 0 is still written
    put_le(packed, bits_of(value), 4);
    put_bytes(tensor, kTensorFloatVal, packed);
    put_bytes(summary_value, kValueTensor, tensor);
    put_bytes(summary_value, kValueMetadata, plugin_metadata("scalars"));
  }
  return event_with_value(wall_time, step, summary_value);
}

std::string encode_text_event(double wall_time, std::int64_t step, std::string_view tag,
                              std::string_view text) {
  std::string dim;
  put_uint(dim, kDimSize, 1);
  std::string shape;
  put_bytes(shape, kShapeDim, dim);
  std::string tensor;
  put_uint(tensor, kTensorDtype, kDtString);
  put_bytes(tensor, kTensorShape, shape);
  put_bytes(tensor, kTensorStringVal, text);
  std::string summary_value;
  put_bytes(summary_value, kValueTag, std::string(tag) + "/text_summary");
  put_bytes(summary_value, kValueTensor, tensor);
  put_bytes(summary_value, kValueMetadata, plugin_metadata("text"));
  return event_with_value(wall_time, step, summary_value);
}

TensorboardWriter::TensorboardWriter(const std::string& log_dir, ScalarStyle style)
    : style_(style) {
  std::error_code error;
  std::filesystem::create_directories(log_dir, error);
  if (error) base::fail("--tensorboard-dir ", log_dir, ": ", error.message());
  const double now = unix_seconds();
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(now));
  const std::string stem = (std::filesystem::path(log_dir) / "events.out.tfevents.").string() +
                           seconds + "." + host_name() + "." + std::to_string(getpid()) + ".";
  for (int n = 0; fd_ < 0; ++n) {
    path_ = stem + std::to_string(n);
    // O_EXCL: never append to another writer's file.
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) base::fail_errno(path_);
  }
  write_record(encode_file_version_event(now));
}

TensorboardWriter::~TensorboardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TensorboardWriter::add_scalar(std::string_view tag, double value, std::int64_t step) {
  write_record(encode_scalar_event(unix_seconds(), step, tag, to_float32(value), style_));
}

void TensorboardWriter::add_text(std::string_view tag, std::string_view text, std::int64_t step) {
  write_record(encode_text_event(unix_seconds(), step, tag, text));
}

void TensorboardWriter::write_record(std::string_view event) {
  const std::string record = tfrecord_frame(event);
  std::size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      // Cut a partly written record off, so that readers never meet a torn one.
      if (::ftruncate(fd_, bytes_) == 0) ::lseek(fd_, bytes_, SEEK_SET);
      errno = saved;
      base::fail_errno(path_);
    }
    done += static_cast<std::size_t>(n);
  }
  bytes_ += static_cast<std::int64_t>(record.size());
}

}  // namespace mds::io
