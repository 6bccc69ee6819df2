// io/safetensors.h against checkpoints.md §6.5: the writer's exact bytes, the reader's rules.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test_support.h"

namespace mds::io {
namespace {

using testing_support::read_file;
using testing_support::ScratchDir;
using testing_support::write_file;

std::string with_header(const std::string& json, const std::string& data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<std::size_t>(i)] = static_cast<char>(json.size() >> (8 * i));
  return bytes + json + data;
}

std::string open_error(const std::string& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, WriterOrdersByAlignmentThenNameAndPadsTheHeaderTo8Bytes) {
  const ScratchDir dir;
  std::vector<std::int64_t> ids = {7, -1};
  std::vector<std::uint16_t> half = {0x3c00, 0x4000, 0x4200};  // fp16 1, 2, 3
  std::vector<float> b = {0.5f}, a = {1.5f, 2.5f};
  write_safetensors(dir.file("t.safetensors"),
                    {{"half", tensor::Tensor(half.data(), tensor::DType::kFloat16, {3})},
                     {"b", tensor::Tensor(b.data(), tensor::DType::kFloat32, {1})},
                     {"ids", tensor::Tensor(ids.data(), tensor::DType::kInt64, {2, 1})},
                     {"a", tensor::Tensor(a.data(), tensor::DType::kFloat32, {2})}},
                    {{"format", "pt"}});
  const std::string bytes = read_file(dir.file("t.safetensors"));
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"ids":{"dtype":"I64","shape":[2,1],"data_offsets":[0,16]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[24,28]},)"
      R"("half":{"dtype":"F16","shape":[3],"data_offsets":[28,34]}})";
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  ASSERT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes.substr(8, json.size()), json);
  EXPECT_EQ(bytes.substr(8 + json.size(), n - json.size()), std::string(n - json.size(), ' '));
  EXPECT_EQ(bytes.size(), 8 + n + 34);

  const SafetensorsFile file = SafetensorsFile::open(dir.file("t.safetensors"));
  ASSERT_EQ(file.entries().size(), 4u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const SafetensorsEntry& h = file.at("half");
  EXPECT_EQ(h.dtype, tensor::DType::kFloat16);
  EXPECT_EQ(h.shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(file.bytes(h), std::string(reinterpret_cast<const char*>(half.data()), 6));
  EXPECT_EQ(file.bytes(file.at("ids")), std::string(reinterpret_cast<const char*>(ids.data()), 16));
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(Safetensors, ReaderRefusesBrokenLayoutsWithOneLineNamingTheFile) {
  const ScratchDir dir;
  const std::string path = dir.file("x.safetensors");
  const auto error_for = [&](const std::string& json, const std::string& data) {
    write_file(path, with_header(json, data));
    return open_error(path);
  };
  const std::string four(4, '\0'), eight(8, '\0');
  EXPECT_EQ(error_for(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four), "");
  EXPECT_NE(error_for(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight)
                .find("must be contiguous"),
            std::string::npos);
  EXPECT_NE(
      error_for(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", four).find("need 8"),
      std::string::npos);
  EXPECT_NE(error_for(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight)
                .find("trailing bytes"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", four)
                .find("unsupported dtype 'Q4'"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", four)
                .find("unknown key 'x'"),
            std::string::npos);
  EXPECT_NE(error_for(R"( {})", "").find("must start with '{'"), std::string::npos);
  write_file(path, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10));
  EXPECT_NE(open_error(path).find("does not fit"), std::string::npos);
  EXPECT_NE(open_error(path).find(path), std::string::npos);
}

}  // namespace
}  // namespace mds::io
