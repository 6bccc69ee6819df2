// .npy files against numpy 1.24's np.save bytes (data.md §5.8, §8.4) and the reader's handling of
// other versions, paddings and damaged files.
#include "io/npy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "test_support.h"

namespace mds::io {
namespace {

using testing_support::hex;
using testing_support::read_file;
using testing_support::ScratchDir;
using testing_support::write_file;

std::string padded_dict(const std::string& dict, std::size_t header_length) {
  return dict + std::string(header_length - 1 - dict.size(), ' ') + "\n";
}

// The preamble of a hand-made file: magic, version, little-endian header length, header text.
std::string preamble(int major, const std::string& text) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t width = major == 1 ? 2 : 4;
  for (std::size_t i = 0; i < width; ++i) out += static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  return out + text;
}

std::string int32_bytes(const std::vector<std::int32_t>& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * 4};
}

TEST(NpyHeader, MatchesNumpyForThirtyInt32) {
  const std::uint64_t shape[] = {30};
  const std::string header = npy_header(NpyDType::kInt32, shape);
  ASSERT_EQ(header.size(), 128u);
  EXPECT_EQ(hex(header.substr(0, 10)),
            "934e554d5059010076"
            "00");
  EXPECT_EQ(header.substr(10),
            padded_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (30,), }", 118));
}

// Strings from numpy.lib.format._write_array_header (numpy 1.24).
TEST(NpyHeader, MatchesNumpyForOtherShapes) {
  const std::uint64_t pairs[] = {22, 2};
  EXPECT_EQ(npy_header(NpyDType::kInt32, pairs).substr(10),
            padded_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (22, 2), }", 118));
  const std::uint64_t huge[] = {4294967296, 2};
  EXPECT_EQ(
      npy_header(NpyDType::kInt64, huge).substr(10),
      padded_dict("{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 2), }", 118));
  const std::uint64_t widest[] = {10000000000000000000ull};  // 20 digits: one growth space left
  EXPECT_EQ(
      npy_header(NpyDType::kUInt32, widest).substr(10),
      padded_dict("{'descr': '<u4', 'fortran_order': False, 'shape': (10000000000000000000,), }",
                  118));
  const std::uint64_t empty[] = {0};
  EXPECT_EQ(npy_header(NpyDType::kUInt32, empty).substr(10),
            padded_dict("{'descr': '<u4', 'fortran_order': False, 'shape': (0,), }", 118));
}

TEST(NpyFile, SaveWritesHeaderThenData) {
  ScratchDir dir;
  const std::vector<std::int32_t> values = {1, -2, 3};
  const std::uint64_t shape[] = {3};
  save_npy(dir.file("a.npy"), std::span<const std::int32_t>(values), shape);
  const std::string bytes = read_file(dir.file("a.npy"));
  EXPECT_EQ(bytes, npy_header(NpyDType::kInt32, shape) + int32_bytes(values));
  EXPECT_EQ(dir.files(), std::vector<std::string>{"a.npy"});  // no temporary left behind
}

TEST(NpyFile, RoundTripsEveryDtype) {
  ScratchDir dir;
  const std::vector<std::int32_t> pairs = {0, 0, 2, 6, 4, 0};
  const std::uint64_t pair_shape[] = {3, 2};
  save_npy(dir.file("i4.npy"), std::span<const std::int32_t>(pairs), pair_shape);
  const std::vector<std::uint32_t> unsigned_values = {4000000000u, 1u};
  const std::uint64_t two[] = {2};
  save_npy(dir.file("u4.npy"), std::span<const std::uint32_t>(unsigned_values), two);
  const std::vector<std::int64_t> wide = {-1, 1ll << 40};
  save_npy(dir.file("i8.npy"), std::span<const std::int64_t>(wide), two);

  const NpyArray i4 = NpyArray::load(dir.file("i4.npy"));
  EXPECT_EQ(i4.dtype(), NpyDType::kInt32);
  EXPECT_EQ(i4.shape(), (std::vector<std::uint64_t>{3, 2}));
  EXPECT_EQ(i4.size(), 6u);
  const auto i4_values = i4.values<std::int32_t>();
  EXPECT_EQ(std::vector<std::int32_t>(i4_values.begin(), i4_values.end()), pairs);
  EXPECT_EQ(i4.at(3), 6);
  const NpyArray u4 = NpyArray::load(dir.file("u4.npy"));
  EXPECT_EQ(u4.at(0), 4000000000ll);
  EXPECT_THROW(u4.values<std::int32_t>(), base::Error);
  const NpyArray i8 = NpyArray::load(dir.file("i8.npy"));
  EXPECT_EQ(i8.at(1), 1ll << 40);
  EXPECT_EQ(i8.values<std::int64_t>()[0], -1);
}

TEST(NpyFile, SaveRefusesValuesThatDoNotFillTheShape) {
  ScratchDir dir;
  const std::vector<std::int32_t> values = {1, 2, 3};
  const std::uint64_t shape[] = {2, 2};
  EXPECT_THROW(save_npy(dir.file("x.npy"), std::span<const std::int32_t>(values), shape),
               base::Error);
  EXPECT_TRUE(dir.files().empty());
}

// Older numpy padded to 16 bytes, version 2.0 has a 4-byte length, and any literal spacing or
// quoting Python accepts may appear: the reader parses, it does not compare.
TEST(NpyFile, ReadsOtherPaddingsVersionsAndSpellings) {
  ScratchDir dir;
  const std::vector<std::int32_t> values = {7, 8};
  const std::string old_text =
      padded_dict("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 70);
  ASSERT_EQ((10 + old_text.size()) % 16, 0u);
  write_file(dir.file("old.npy"), preamble(1, old_text) + int32_bytes(values));
  EXPECT_EQ(NpyArray::load(dir.file("old.npy")).at(1), 8);

  const std::string v2_text = padded_dict(
      "{\"shape\":(1,2),\"fortran_order\" : False,'descr':'<i4'}", 116);  // 12 + 116 = 128
  write_file(dir.file("v2.npy"), preamble(2, v2_text) + int32_bytes(values));
  const NpyArray v2 = NpyArray::load(dir.file("v2.npy"));
  EXPECT_EQ(v2.shape(), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(v2.at(0), 7);

  write_file(dir.file("v3.npy"), preamble(3, v2_text) + int32_bytes(values));
  EXPECT_EQ(NpyArray::load(dir.file("v3.npy")).at(1), 8);
}

void expect_load_error(const std::string& path, const std::string& fragment) {
  try {
    NpyArray::load(path);
    ADD_FAILURE() << "loaded " << path;
  } catch (const base::Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(NpyFile, DamagedFilesFailNamingFileAndField) {
  ScratchDir dir;
  const auto header = [](const std::string& dict) { return padded_dict(dict, 118); };
  const std::vector<std::int32_t> two = {1, 2};
  const struct {
    const char* name;
    std::string bytes;
    const char* fragment;
  } cases[] = {
      {"magic.npy", "\x93NUMPZ\x01\x00\x00\x00", "bad magic"},
      {"empty.npy", "", "bad magic"},
      {"version.npy", preamble(4, header("{}")), "version 4.0"},
      {"length.npy", preamble(1, header("{}")).substr(0, 60), "header length 118"},
      {"big.npy",
       preamble(1, header("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }")) +
           int32_bytes(two),
       "big-endian"},
      {"float.npy",
       preamble(1, header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }")) +
           int32_bytes(two),
       "'descr' is '<f8'"},
      {"fortran.npy",
       preamble(1, header("{'descr': '<i4', 'fortran_order': True, 'shape': (2,), }")) +
           int32_bytes(two),
       "fortran_order"},
      {"noshape.npy", preamble(1, header("{'descr': '<i4', 'fortran_order': False, }")),
       "lacks 'shape'"},
      {"badshape.npy",
       preamble(1, header("{'descr': '<i4', 'fortran_order': False, 'shape': (-2,), }")),
       "'shape'"},
      {"short.npy",
       preamble(1, header("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }")) +
           int32_bytes(two),
       "needs 12"},
      {"key.npy", preamble(1, header("{'descr': '<i4', 'fortran_order': False, 'x': 1}")),
       "unexpected key 'x'"},
  };
  for (const auto& c : cases) {
    write_file(dir.file(c.name), c.bytes);
    expect_load_error(dir.file(c.name), c.fragment);
  }
}

}  // namespace
}  // namespace mds::io
