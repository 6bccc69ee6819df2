// CRC-32C (RFC 3720 test vectors), TFRecord framing and the hand-encoded Event messages, byte for
// byte, and the event file as the writer leaves it.
#include "io/tensorboard_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/crc32c.h"
#include "test_support.h"

namespace mds::io {
namespace {

using testing_support::hex;
using testing_support::read_file;
using testing_support::ScratchDir;
using testing_support::unhex;

std::uint32_t le32(std::string_view bytes, std::size_t at) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<std::uint8_t>(bytes[at + i]);
  return value;
}

std::uint64_t le64(std::string_view bytes, std::size_t at) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<std::uint8_t>(bytes[at + i]);
  return value;
}

// Hex written in groups for reading: "1005 2a0a" → "10052a0a".
std::string spaced(std::string text) {
  std::erase(text, ' ');
  return text;
}

// Splits a TFRecord file into its records, checking both CRCs of each.
std::vector<std::string> read_records(std::string_view file) {
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size()) << "torn header";
    const std::uint64_t length = le64(file, at);
    EXPECT_EQ(le32(file, at + 8), masked_crc32c(file.substr(at, 8)));
    EXPECT_LE(at + 16 + length, file.size()) << "torn record";
    const std::string_view data = file.substr(at + 12, length);
    EXPECT_EQ(le32(file, at + 12 + length), masked_crc32c(data));
    records.emplace_back(data);
    at += 16 + length;
  }
  return records;
}

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(masked_crc32c(""), 0xA282EAD8u);
  EXPECT_EQ(masked_crc32c(std::string(8, '\0')), 0x07980329u);
}

TEST(TfRecord, Framing) {
  EXPECT_EQ(hex(tfrecord_frame("")), spaced("0000000000000000 29039807 d8ea82a2"));
  const std::string record = tfrecord_frame("abc");
  ASSERT_EQ(record.size(), 16u + 3);
  EXPECT_EQ(hex(record.substr(0, 8)), "0300000000000000");
  EXPECT_EQ(le32(record, 8), masked_crc32c(record.substr(0, 8)));
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(le32(record, 15), masked_crc32c("abc"));
}

TEST(EventEncoding, FileVersion) {
  // Event{file_version: "brain.Event:2"}; wall_time 1.5 is the double 0x3FF8000000000000.
  EXPECT_EQ(hex(encode_file_version_event(0)), "1a0d" + hex("brain.Event:2"));
  EXPECT_EQ(hex(encode_file_version_event(1.5)),
            spaced("09 000000000000f83f 1a0d") + hex("brain.Event:2"));
}

TEST(EventEncoding, SimpleValueScalar) {
  // Event{step: 5, summary{value{tag: "a", simple_value: 1.0f}}}
  EXPECT_EQ(hex(encode_scalar_event(0, 5, "a", 1.0f, ScalarStyle::kSimpleValue)),
            spaced("1005 2a0a 0a08 0a0161 150000803f"));
  // proto3 leaves out a zero step, but not a zero simple_value: it is a member of a oneof.
  EXPECT_EQ(hex(encode_scalar_event(0, 0, "a", 0.0f, ScalarStyle::kSimpleValue)),
            spaced("2a0a 0a08 0a0161 1500000000"));
  // A negative step is a ten-byte varint.
  EXPECT_EQ(hex(encode_scalar_event(0, -1, "a", 0.0f, ScalarStyle::kSimpleValue)).substr(0, 22),
            spaced("10 ffffffffffffffffff01"));
}

TEST(EventEncoding, TensorScalarAsTorchNewStyle) {
  // Value{tag: "a", tensor{dtype: DT_FLOAT, float_val: [1.0]},
  //       metadata{plugin_data{plugin_name: "scalars"}}}
  const std::string value =
      spaced("0a0161 4208 0801 2a04 0000803f 4a0b 0a09 0a07") + hex("scalars");
  EXPECT_EQ(hex(encode_scalar_event(0, 5, "a", 1.0f, ScalarStyle::kTensor)),
            spaced("1005 2a1c 0a1a") + value);
  // The packed float is written even when it is 0.
  EXPECT_NE(hex(encode_scalar_event(0, 5, "a", 0.0f, ScalarStyle::kTensor)).find("2a0400000000"),
            std::string::npos);
}

TEST(EventEncoding, TextAsTorchAddText) {
  // Value{tag: "lr/text_summary", tensor{dtype: DT_STRING, tensor_shape{dim{size: 1}},
  //       string_val: ["0.1"]}, metadata{plugin_data{plugin_name: "text"}}}
  const std::string tensor = spaced("0807 1204 1202 0801 4203") + hex("0.1");
  const std::string value =
      "0a0f" + hex("lr/text_summary") + "420d" + tensor + spaced("4a08 0a06 0a04") + hex("text");
  EXPECT_EQ(hex(encode_text_event(0, 3, "lr", "0.1")), spaced("1003 2a2c 0a2a") + value);
}

TEST(TensorboardWriter, WritesWholeCheckedRecords) {
  ScratchDir dir;
  const std::string log_dir = dir.file("runs/nested");
  std::string path;
  {
    TensorboardWriter writer(log_dir);
    path = writer.path();
    writer.add_scalar("lm-loss-training/lm loss", 2.5, 7);
    writer.add_text("seed", "1234", 0);
    writer.add_scalar("x", 1e300, 1);  // stored as a float: inf
  }
  const std::string name = std::filesystem::path(path).filename().string();
  EXPECT_TRUE(std::regex_match(name, std::regex(R"(events\.out\.tfevents\.\d{10}\..+\.\d+\.0)")))
      << name;
  EXPECT_EQ(std::filesystem::path(path).parent_path(), std::filesystem::path(log_dir));
  const auto records = read_records(read_file(path));
  ASSERT_EQ(records.size(), 4u);
  // Each event starts with its wall time (field 1, 9 bytes); the rest is what we encode.
  for (const auto& record : records) {
    ASSERT_GT(record.size(), 9u);
    EXPECT_EQ(record[0], '\x09');
    double wall_time = 0;
    std::memcpy(&wall_time, record.data() + 1, 8);
    EXPECT_GT(wall_time, 1.5e9);
  }
  EXPECT_EQ(records[0].substr(9), encode_file_version_event(0));
  EXPECT_EQ(records[1].substr(9),
            encode_scalar_event(0, 7, "lm-loss-training/lm loss", 2.5f, ScalarStyle::kTensor));
  EXPECT_EQ(records[2].substr(9), encode_text_event(0, 0, "seed", "1234"));
  EXPECT_EQ(
      records[3].substr(9),
      encode_scalar_event(0, 1, "x", std::numeric_limits<float>::infinity(), ScalarStyle::kTensor));

  // A second writer in the same folder never shares a file.
  TensorboardWriter again(log_dir, ScalarStyle::kSimpleValue);
  EXPECT_NE(again.path(), path);
  again.add_scalar("a", 1.0, 5);
  const auto more = read_records(read_file(again.path()));
  ASSERT_EQ(more.size(), 2u);
  EXPECT_EQ(more[1].substr(9), encode_scalar_event(0, 5, "a", 1.0f, ScalarStyle::kSimpleValue));
}

TEST(TensorboardWriter, UnusableFolderFails) {
  ScratchDir dir;
  testing_support::write_file(dir.file("file"), "x");
  EXPECT_THROW(TensorboardWriter(dir.file("file")), base::Error);
  EXPECT_THROW(TensorboardWriter(dir.file("file/below")), base::Error);
}

}  // namespace
}  // namespace mds::io
