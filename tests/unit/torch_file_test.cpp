#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "io/pickle_value.h"
#include "io/torch_file.h"
#include "io/zip_store.h"

namespace mds::io {
namespace {

std::uint32_t le32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<unsigned char>(s[at + i])} << (8 * i);
  return v;
}

Value tensor(const std::string& key, tensor::DType dtype, std::vector<std::int64_t> shape,
             std::vector<std::int64_t> strides = {}, std::int64_t offset = 0) {
  TensorRef t;
  t.dtype = dtype;
  t.storage_key = key;
  t.storage_offset = offset;
  t.strides = strides.empty() ? TensorRef::contiguous_strides(shape) : strides;
  t.shape = std::move(shape);
  return Value::tensor(std::move(t));
}

const std::string kFloats("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f, 2.0f

TEST(TorchFile, ReferenceObjectMatchesTorchRecords) {
  Value root = Value::ordered_dict();
  root.set("w", tensor("0", tensor::DType::kFloat32, {2}));
  const std::string file = torch_file_bytes(root, {{"0", {tensor::DType::kFloat32, kFloats}}});
  const auto entries = read_zip_directory(file, "mem");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].name, "archive/data.pkl");
  EXPECT_EQ(entries[0].size, 165u);
  EXPECT_EQ(entries[1].name, "archive/data/0");
  EXPECT_EQ(file.substr(entries[1].data_offset, 8), kFloats);
  EXPECT_EQ(entries[2].name, "archive/version");
  EXPECT_EQ(file.substr(entries[2].data_offset, 2), "3\n");
  for (const auto& e : entries) {
    EXPECT_EQ(e.data_offset % 64, 0u) << e.name;  // §7.8
    EXPECT_EQ(e.crc32, crc32_of(file.substr(e.data_offset, e.size))) << e.name;
  }
  // torch 1.13 lays the same object out in 747 bytes from a buffer ("archive/" prefix).
  EXPECT_EQ(file.size(), 747u);
  const auto loaded = TorchFile::from_bytes(file, "mem");
  EXPECT_EQ(loaded.prefix(), "archive");
  EXPECT_EQ(loaded.root(), [&] {
    Value expected = root;
    Value& w = const_cast<Value&>(*expected.find("w"));
    w.as_tensor().storage_numel = 2;
    return expected;
  }());
  EXPECT_EQ(loaded.tensor_bytes(loaded.root().find("w")->as_tensor()), kFloats);
  loaded.verify_checksums();
}

TEST(TorchFile, RoundTripsViewsSharedStoragesAndEveryDtype) {
  std::string grid;
  for (int i = 0; i < 12; ++i) {
    const float f = static_cast<float>(i);
    grid.append(reinterpret_cast<const char*>(&f), 4);
  }
  TorchStorages storages{{"0", {tensor::DType::kFloat32, grid}}};
  Value root = Value::dict();
  root.set("grid", tensor("0", tensor::DType::kFloat32, {3, 4}));
  root.set("row2", tensor("0", tensor::DType::kFloat32, {4}, {1}, 8));
  root.set("col1", tensor("0", tensor::DType::kFloat32, {3}, {4}, 1));
  const std::string payload(24, '\x5a');
  const tensor::DType all[] = {
      tensor::DType::kFloat16, tensor::DType::kBFloat16, tensor::DType::kFloat64,
      tensor::DType::kInt64,   tensor::DType::kInt32,    tensor::DType::kUInt8,
      tensor::DType::kBool,    tensor::DType::kInt8,     tensor::DType::kInt16};
  int key = 1;
  for (const auto dtype : all) {
    const std::string k = std::to_string(key++);
    storages[k] = {dtype, std::string_view(payload).substr(
                              0, 24 / tensor::dtype_size(dtype) * tensor::dtype_size(dtype))};
    root.set(std::string(tensor::dtype_name(dtype)),
             tensor(k, dtype, {static_cast<std::int64_t>(24 / tensor::dtype_size(dtype))}));
  }
  const std::string path = testing::TempDir() + "/rt_" + std::to_string(getpid()) + ".pt";
  write_torch_file(path, root, storages);
  const auto loaded = TorchFile::open(path);
  std::remove(path.c_str());
  const ValueRef ref = loaded.root_ref();
  const TensorRef& col = ref["col1"].as_tensor();
  EXPECT_EQ(col.storage_numel, 12);
  EXPECT_EQ(loaded.tensor_bytes(col), grid.substr(4, 4) + grid.substr(20, 4) + grid.substr(36, 4));
  EXPECT_EQ(loaded.tensor_bytes(ref["row2"].as_tensor()), grid.substr(32, 16));
  EXPECT_EQ(loaded.storage_bytes("0").data(),
            loaded.storage_bytes(ref["grid"].as_tensor().storage_key).data());
  EXPECT_EQ(ref["bfloat16"].as_tensor().dtype, tensor::DType::kBFloat16);
  EXPECT_EQ(loaded.tensor_bytes(ref["bool"].as_tensor()), payload);
}

TEST(TorchFile, Zip64RecordsRoundTrip) {
  Value root = Value::list({tensor("0", tensor::DType::kFloat32, {2})});
  TorchWriteOptions options;
  options.zip64_threshold = 1;  // every entry and offset takes the ZIP64 path
  const std::string file =
      torch_file_bytes(root, {{"0", {tensor::DType::kFloat32, kFloats}}}, options);
  const auto entries = read_zip_directory(file, "z64");
  ASSERT_EQ(entries.size(), 3u);
  for (const auto& e : entries) EXPECT_EQ(e.data_offset % 64, 0u);
  const auto loaded = TorchFile::from_bytes(file, "z64");
  EXPECT_EQ(loaded.tensor_bytes(loaded.root().items()[0].as_tensor()), kFloats);
}

TEST(TorchFile, WriterRejectsInconsistentStorages) {
  Value root = Value::list({tensor("0", tensor::DType::kFloat32, {3})});
  EXPECT_THROW(torch_file_bytes(root, {{"0", {tensor::DType::kFloat32, kFloats}}}),
               base::Error);  // too small
  EXPECT_THROW(torch_file_bytes(root, {{"0", {tensor::DType::kFloat16, kFloats}}}),
               base::Error);                              // dtype
  EXPECT_THROW(torch_file_bytes(root, {}), base::Error);  // missing
}

std::string error_of(std::string bytes) {
  try {
    TorchFile::from_bytes(std::move(bytes), "bad.pt");
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

TEST(TorchFile, TruncatedAndCorruptFilesFailCleanly) {
  Value root = Value::ordered_dict();
  root.set("w", tensor("0", tensor::DType::kFloat32, {2}));
  const std::string file = torch_file_bytes(root, {{"0", {tensor::DType::kFloat32, kFloats}}});
  for (std::size_t n = 0; n < file.size(); n += 7) EXPECT_NE(error_of(file.substr(0, n)), "") << n;
  // Every single-byte corruption either fails cleanly or loads.
  for (std::size_t i = 0; i < file.size(); ++i) {
    std::string bad = file;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    try {
      TorchFile::from_bytes(bad, "bad.pt").verify_checksums();
    } catch (const base::Error&) {
    }
  }
  // Storage record shorter than the pickle claims.
  std::string shrunk = file;
  const auto entries = read_zip_directory(file, "mem");
  const std::size_t central = file.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(central, std::string::npos);
  std::size_t second = file.find(std::string("PK\x01\x02", 4), central + 4);
  ASSERT_EQ(le32(file, second + 24), 8u);
  shrunk[second + 20] = shrunk[second + 24] = 4;
  EXPECT_NE(error_of(shrunk).find("storage 0 has 4 bytes"), std::string::npos);
  EXPECT_NE(error_of("PK\x05\x06" + std::string(18, '\0')).find("empty zip"), std::string::npos);
  EXPECT_NE(error_of("not a zip at all, just text").find("not a zip archive"), std::string::npos);
  // The first bytes of torch.save(..., _use_new_zipfile_serialization=False), torch 1.13.
  const std::string legacy("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.\x80", 16);
  EXPECT_NE(error_of(legacy).find("bad.pt: torch's legacy (pre-1.6) serialization"),
            std::string::npos);
  (void)entries;
}

TEST(TorchFile, RecordsMustShareOnePrefix) {
  std::string out;
  ZipWriter zip([&](const char* d, std::size_t n) { out.append(d, n); });
  zip.add("a/data.pkl", "\x80\x02N.");
  zip.add("a/version", "3\n");
  zip.add("b/extra", "x");
  zip.finish();
  EXPECT_NE(error_of(out).find("outside the archive folder a/"), std::string::npos);
}

}  // namespace
}  // namespace mds::io
