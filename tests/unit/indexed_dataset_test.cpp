// Indexed dataset formats against data.md §1.6 and §8.2 (bytes verified with upstream), plus the
// reader's checks on hostile or damaged files.
#include "io/indexed_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "test_support.h"

namespace mds::io {
namespace {

namespace fs = std::filesystem;
using testing_support::hex;
using testing_support::read_file;
using testing_support::ScratchDir;
using testing_support::unhex;
using testing_support::write_file;

// --- vectors of data.md §8.2 -------------------------------------------------------------------
constexpr const char* kTinyIdx =
    "4d4d4944494458000001000000000000000802000000000000000300000000000000030000000300000000000000"
    "000000000600000000000000000000000000000001000000000000000200000000000000";
constexpr const char* kTinyBin = "883ce30350c40204520150c4";
constexpr const char* kCachedIdx =
    "544e54494458000001000000000000000400000000000000040000000000000002000000000000000200000000"
    "000000030000000000000000000000000000000100000000000000020000000000000000000000000000000300"
    "000000000000060000000000000003000000000000000300000000000000000000000000000001000000000000"
    "000200000000000000";
constexpr const char* kCachedBin = "883c0000e303000050c40000020400005201000050c40000";
constexpr const char* kEmptyIdx =
    "4d4d49444944580000010000000000000008000000000000000001000000000000000000000000000000";
constexpr const char* kInt32Idx =
    "4d4d4944494458000001000000000000000401000000000000000200000000000000020000000000000000000000"
    "00000000000000000100000000000000";
constexpr const char* kInt32Bin = "7011010001000000";
constexpr const char* kSentenceIdx =
    "4d4d4944494458000001000000000000000803000000000000000300000000000000020000000300000001000000"
    "000000000000000004000000000000000a000000000000000000000000000000020000000000000003000000000000"
    "00";
constexpr const char* kSentenceBin = "0a000b000c000d000e000f00";

template <typename T>
void put(std::string& bytes, std::size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

// The error text of `body`, or "" when it does not throw base::Error.
template <typename Body>
std::string error_of(Body body) {
  try {
    body();
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

class IndexedDatasetTest : public testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  std::vector<std::string> files() const { return dir_.files(); }
  void write_dataset(const std::string& prefix, std::string_view idx, std::string_view bin) {
    write_file(idx_path(path(prefix)), idx);
    write_file(bin_path(path(prefix)), bin);
  }

  ScratchDir dir_;
};

void build(const std::string& prefix, DType dtype, DatasetImpl impl,
           const std::vector<std::vector<std::vector<std::int32_t>>>& documents) {
  IndexedDatasetBuilder builder(prefix, dtype, impl);
  for (const auto& document : documents) {
    for (const auto& sequence : document) builder.add_item(sequence);
    builder.end_document();
  }
  builder.finalize();
}

const std::vector<std::vector<std::vector<std::int32_t>>> kTinyDocs = {{{15496, 995, 50256}},
                                                                       {{1026, 338, 50256}}};

// --- dtype and impl helpers --------------------------------------------------------------------

TEST(DType, SizesAndCodes) {
  EXPECT_EQ(dtype_size(DType::kUInt8), 1u);
  EXPECT_EQ(dtype_size(DType::kInt8), 1u);
  EXPECT_EQ(dtype_size(DType::kInt16), 2u);
  EXPECT_EQ(dtype_size(DType::kInt32), 4u);
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_EQ(dtype_size(DType::kFloat64), 8u);
  EXPECT_EQ(dtype_size(DType::kDouble), 8u);
  EXPECT_EQ(dtype_size(DType::kUInt16), 2u);
  EXPECT_FALSE(dtype_from_code(0));
  EXPECT_FALSE(dtype_from_code(9));
  EXPECT_FALSE(dtype_from_code(0x100000008ull));
  for (std::uint64_t code = 1; code <= 8; ++code) {
    ASSERT_TRUE(dtype_from_code(code));
    EXPECT_EQ(static_cast<std::uint64_t>(*dtype_from_code(code)), code);
  }
  EXPECT_EQ(dtype_name(DType::kUInt16), "uint16");
  EXPECT_EQ(dtype_name(DType::kInt32), "int32");
  EXPECT_NE(dtype_name(DType::kFloat64), dtype_name(DType::kDouble));
}

TEST(DType, BestFittingUsesUpstreamThreshold) {
  EXPECT_EQ(best_fitting_dtype(std::nullopt), DType::kInt32);
  EXPECT_EQ(best_fitting_dtype(50257), DType::kUInt16);
  EXPECT_EQ(best_fitting_dtype(65499), DType::kUInt16);
  EXPECT_EQ(best_fitting_dtype(65500), DType::kInt32);
  EXPECT_EQ(best_fitting_dtype(250880), DType::kInt32);
}

TEST(DType, DatasetImplNames) {
  EXPECT_EQ(parse_dataset_impl("mmap"), DatasetImpl::kMmap);
  EXPECT_EQ(parse_dataset_impl("cached"), DatasetImpl::kCached);
  EXPECT_EQ(parse_dataset_impl("lazy"), DatasetImpl::kLazy);
  EXPECT_EQ(dataset_impl_name(DatasetImpl::kCached), "cached");
  const std::string message = error_of([] { parse_dataset_impl("infer"); });
  EXPECT_NE(message.find("'infer'"), std::string::npos) << message;
  EXPECT_NE(message.find("'lazy', 'cached', 'mmap'"), std::string::npos) << message;
  EXPECT_EQ(bin_path("a/b"), "a/b.bin");
  EXPECT_EQ(idx_path("a/b"), "a/b.idx");
}

// --- spec vectors, written by the builder ------------------------------------------------------

TEST_F(IndexedDatasetTest, TinyMmapMatchesSpec) {
  build(path("tiny"), DType::kUInt16, DatasetImpl::kMmap, kTinyDocs);
  EXPECT_EQ(hex(read_file(path("tiny.idx"))), kTinyIdx);
  EXPECT_EQ(hex(read_file(path("tiny.bin"))), kTinyBin);
  EXPECT_EQ(read_file(path("tiny.idx")).size(), 82u);
  EXPECT_EQ(files(), (std::vector<std::string>{"tiny.bin", "tiny.idx"}));
}

TEST_F(IndexedDatasetTest, TinyCachedMatchesSpec) {
  // The legacy builder stores int32 whatever dtype is asked for, as upstream's does.
  build(path("cached"), DType::kUInt16, DatasetImpl::kCached, kTinyDocs);
  EXPECT_EQ(hex(read_file(path("cached.idx"))), kCachedIdx);
  EXPECT_EQ(hex(read_file(path("cached.bin"))), kCachedBin);
  EXPECT_EQ(read_file(path("cached.idx")).size(), 144u);
  build(path("lazy"), DType::kInt32, DatasetImpl::kLazy, kTinyDocs);
  EXPECT_EQ(hex(read_file(path("lazy.idx"))), kCachedIdx);
}

TEST_F(IndexedDatasetTest, EmptyDatasetIs42Bytes) {
  build(path("empty"), DType::kUInt16, DatasetImpl::kMmap, {});
  EXPECT_EQ(hex(read_file(path("empty.idx"))), kEmptyIdx);
  EXPECT_EQ(read_file(path("empty.idx")).size(), 42u);
  EXPECT_EQ(read_file(path("empty.bin")).size(), 0u);
  const IndexedDataset dataset = IndexedDataset::open(path("empty"));
  EXPECT_EQ(dataset.num_sequences(), 0u);
  EXPECT_EQ(dataset.num_documents(), 0u);
}

TEST_F(IndexedDatasetTest, Int32DatasetMatchesSpec) {
  build(path("wide"), DType::kInt32, DatasetImpl::kMmap, {{{70000, 1}}});
  EXPECT_EQ(hex(read_file(path("wide.idx"))), kInt32Idx);
  EXPECT_EQ(hex(read_file(path("wide.bin"))), kInt32Bin);
  EXPECT_EQ(read_file(path("wide.idx")).size(), 62u);
}

TEST_F(IndexedDatasetTest, SentenceLevelMatchesSpec) {
  build(path("sent"), DType::kUInt16, DatasetImpl::kMmap, {{{10, 11}, {12, 13, 14}}, {{15}}});
  EXPECT_EQ(hex(read_file(path("sent.idx"))), kSentenceIdx);
  EXPECT_EQ(hex(read_file(path("sent.bin"))), kSentenceBin);
  EXPECT_EQ(read_file(path("sent.idx")).size(), 94u);
}

// --- spec vectors, parsed ----------------------------------------------------------------------

TEST(IndexedParse, SpecVectorsParseAndReserialize) {
  struct Case {
    const char* idx;
    const char* bin;
    DatasetImpl impl;
    DType dtype;
    std::vector<std::int32_t> sizes;
    std::vector<std::int64_t> pointers;
    std::vector<std::int64_t> doc_idx;
  };
  const std::vector<Case> cases = {
      {kTinyIdx, kTinyBin, DatasetImpl::kMmap, DType::kUInt16, {3, 3}, {0, 6}, {0, 1, 2}},
      {kCachedIdx, kCachedBin, DatasetImpl::kCached, DType::kInt32, {3, 3}, {0, 12}, {0, 1, 2}},
      {kEmptyIdx, "", DatasetImpl::kMmap, DType::kUInt16, {}, {}, {0}},
      {kInt32Idx, kInt32Bin, DatasetImpl::kMmap, DType::kInt32, {2}, {0}, {0, 1}},
      {kSentenceIdx,
       kSentenceBin,
       DatasetImpl::kMmap,
       DType::kUInt16,
       {2, 3, 1},
       {0, 4, 10},
       {0, 2, 3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.idx);
    const std::string bytes = unhex(c.idx);
    const DatasetIndex index = parse_index(bytes, "vector.idx", unhex(c.bin).size());
    EXPECT_EQ(index.impl, c.impl);
    EXPECT_EQ(index.dtype, c.dtype);
    EXPECT_EQ(index.sizes, c.sizes);
    EXPECT_EQ(index.pointers, c.pointers);
    EXPECT_EQ(index.doc_idx, c.doc_idx);
    EXPECT_EQ(index.bin_bytes(), unhex(c.bin).size());
    EXPECT_EQ(hex(serialize_index(index)), c.idx);
  }
}

TEST(IndexedParse, TrailingBytesAreAcceptedAsUpstream) {
  const std::string bytes = unhex(kTinyIdx) + std::string("trailing junk");
  const DatasetIndex index = parse_index(bytes, "t.idx", 12);
  EXPECT_EQ(index.sizes, (std::vector<std::int32_t>{3, 3}));
  EXPECT_EQ(hex(serialize_index(index)), kTinyIdx);
}

TEST(IndexedParse, SerializeRecomputesPointers) {
  DatasetIndex index;
  index.dtype = DType::kInt64;
  index.sizes = {1, 0, 5};
  index.doc_idx = {0, 3};
  const DatasetIndex again = parse_index(serialize_index(index), "x.idx", 48);
  EXPECT_EQ(again.pointers, (std::vector<std::int64_t>{0, 8, 8}));
  index.impl = DatasetImpl::kLazy;
  const DatasetIndex legacy = parse_index(serialize_index(index), "x.idx", 48);
  EXPECT_EQ(legacy.impl, DatasetImpl::kCached);
  EXPECT_EQ(legacy.pointers, (std::vector<std::int64_t>{0, 8, 8}));
  EXPECT_EQ(legacy.sizes, index.sizes);
}

// --- hostile and damaged indexes ---------------------------------------------------------------

struct BadIndex {
  std::string name;
  std::string bytes;
  std::string expected;  // substring of the error
};

std::vector<BadIndex> bad_indexes() {
  const std::string tiny = unhex(kTinyIdx);
  const std::string cached = unhex(kCachedIdx);
  std::vector<BadIndex> cases;
  auto mmap_with = [&](std::size_t offset, auto value) {
    std::string bytes = tiny;
    put(bytes, offset, value);
    return bytes;
  };
  auto legacy_with = [&](std::size_t offset, auto value) {
    std::string bytes = cached;
    put(bytes, offset, value);
    return bytes;
  };
  cases.push_back({"empty file", "", "truncated: 0 bytes"});
  cases.push_back({"magic prefix only", tiny.substr(0, 5), "truncated: 5 bytes"});
  cases.push_back({"bad magic", "PK\x03\x04 not an index at all", "bad magic (50 4b 03 04"});
  cases.push_back({"mmap magic with junk 9th byte", mmap_with(8, std::uint8_t{1}), "bad magic"});
  cases.push_back({"mmap header cut", tiny.substr(0, 30), "30 bytes, but an MMIDIDX header"});
  cases.push_back(
      {"mmap version 2", mmap_with(9, std::uint64_t{2}), "unsupported index version 2"});
  cases.push_back({"mmap dtype 0", mmap_with(17, std::uint8_t{0}), "unknown dtype code 0"});
  cases.push_back({"mmap dtype 9", mmap_with(17, std::uint8_t{9}), "unknown dtype code 9"});
  cases.push_back({"mmap arrays cut", tiny.substr(0, 81), "needs 82 bytes, but the file has 81"});
  cases.push_back({"mmap huge N", mmap_with(18, std::uint64_t{1} << 62), "more than 2^64 bytes"});
  cases.push_back({"mmap N overflow", mmap_with(18, ~std::uint64_t{0}), "more than 2^64 bytes"});
  cases.push_back({"mmap huge D", mmap_with(26, std::uint64_t{1} << 40), "truncated: the header"});
  cases.push_back({"mmap negative size", mmap_with(38, std::int32_t{-1}), "sizes[1] = -1"});
  cases.push_back(
      {"mmap bad pointer", mmap_with(50, std::int64_t{7}), "pointers[1] = 7, expected 6"});
  cases.push_back({"mmap first pointer", mmap_with(42, std::int64_t{2}), "pointers[0] = 2"});
  cases.push_back({"mmap doc_idx start", mmap_with(58, std::int64_t{1}), "doc_idx[0] = 1"});
  cases.push_back({"mmap doc_idx end", mmap_with(74, std::int64_t{3}),
                   "doc_idx ends at 3 but the index has 2"});
  {
    std::string bytes = mmap_with(66, std::int64_t{2});
    put(bytes, 74, std::int64_t{1});
    cases.push_back(
        {"mmap doc_idx decreasing", bytes, "doc_idx[2] = 1 is smaller than doc_idx[1]"});
  }
  {
    std::string bytes = mmap_with(26, std::uint64_t{0});
    cases.push_back({"mmap doc_idx empty", bytes.substr(0, 58), "doc_idx is empty"});
  }
  cases.push_back({"legacy header cut", cached.substr(0, 50), "a TNTIDX header has 56"});
  cases.push_back({"legacy version", legacy_with(8, std::uint64_t{0}), "version 0"});
  cases.push_back({"legacy dtype", legacy_with(16, std::uint64_t{42}), "unknown dtype code 42"});
  cases.push_back({"legacy element size", legacy_with(24, std::uint64_t{2}),
                   "element size 2 does not match dtype int32 (4 bytes)"});
  cases.push_back({"legacy arrays cut", cached.substr(0, 143), "needs 144 bytes"});
  cases.push_back({"legacy L overflow", legacy_with(32, ~std::uint64_t{0}), "more than 2^64"});
  {
    std::string bytes = legacy_with(40, std::uint64_t{1});  // S = 1 < L = 2
    cases.push_back({"legacy multi-dim", bytes, "multi-dimensional items are not supported"});
  }
  cases.push_back({"legacy dim_offsets", legacy_with(64, std::int64_t{2}),
                   "dim_offsets[1] = 2, expected 1 (multi-dimensional items are not supported)"});
  cases.push_back(
      {"legacy data_offsets", legacy_with(88, std::int64_t{4}), "data_offsets[1] = 4, expected 3"});
  cases.push_back({"legacy negative size", legacy_with(112, std::int64_t{-3}), "sizes[1] = -3"});
  cases.push_back(
      {"legacy huge size", legacy_with(104, std::int64_t{1} << 40), "larger than 2^31-1"});
  cases.push_back({"legacy doc_idx", legacy_with(136, std::int64_t{5}), "doc_idx ends at 5"});
  return cases;
}

TEST(IndexedParse, RejectsDamagedIndexesNamingFileAndField) {
  for (const BadIndex& c : bad_indexes()) {
    SCOPED_TRACE(c.name);
    const std::string message = error_of([&] { parse_index(c.bytes, "data/x.idx", std::nullopt); });
    EXPECT_EQ(message.rfind("data/x.idx: ", 0), 0u) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
}

TEST(IndexedParse, ChecksBinSize) {
  const std::string tiny = unhex(kTinyIdx);
  std::string message = error_of([&] { parse_index(tiny, "d/t.idx", 10); });
  EXPECT_NE(
      message.find("d/t.bin is truncated: d/t.idx describes 12 bytes of tokens, the file has 10"),
      std::string::npos)
      << message;
  message = error_of([&] { parse_index(tiny, "d/t.idx", 15); });
  EXPECT_NE(message.find("d/t.bin has 3 extra bytes"), std::string::npos) << message;
  message = error_of([&] { parse_index(unhex(kCachedIdx), "c.idx", 12); });
  EXPECT_NE(message.find("c.bin is truncated"), std::string::npos) << message;
  EXPECT_NO_THROW(parse_index(tiny, "d/t.idx", 12));
  EXPECT_NO_THROW(parse_index(tiny, "d/t.idx", std::nullopt));
}

// --- reading -----------------------------------------------------------------------------------

TEST_F(IndexedDatasetTest, RoundTripEveryIntegerDtype) {
  const std::vector<std::pair<DType, std::vector<std::int32_t>>> cases = {
      {DType::kUInt8, {0, 255, 7}},
      {DType::kInt8, {-128, 127, 0}},
      {DType::kInt16, {-32768, 32767, 5}},
      {DType::kUInt16, {0, 65535, 50256}},
      {DType::kInt32, {std::numeric_limits<std::int32_t>::min(), 70000, -1}},
      {DType::kInt64, {std::numeric_limits<std::int32_t>::max(), -5, 9}},
  };
  for (const auto& [dtype, tokens] : cases) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::string prefix = path(std::string("rt_") + std::to_string(static_cast<int>(dtype)));
    build(prefix, dtype, DatasetImpl::kMmap, {{tokens, {tokens[1]}}, {{}}, {{tokens[2]}}});
    const IndexedDataset dataset = IndexedDataset::open(prefix);
    EXPECT_EQ(dataset.index().dtype, dtype);
    ASSERT_EQ(dataset.num_sequences(), 4u);
    EXPECT_EQ(dataset.num_documents(), 3u);
    EXPECT_EQ(dataset.index().doc_idx, (std::vector<std::int64_t>{0, 2, 3, 4}));
    EXPECT_EQ(dataset.index().sizes, (std::vector<std::int32_t>{3, 1, 0, 1}));
    const std::vector<std::int64_t> widened(tokens.begin(), tokens.end());
    EXPECT_EQ(dataset.get(0), widened);
    EXPECT_EQ(dataset.get(1), std::vector<std::int64_t>{tokens[1]});
    EXPECT_TRUE(dataset.get(2).empty());
    EXPECT_EQ(dataset.get(0, 1), (std::vector<std::int64_t>{tokens[1], tokens[2]}));
    EXPECT_EQ(dataset.get(0, 1, 1), std::vector<std::int64_t>{tokens[1]});
    EXPECT_EQ(dataset.get(0, 3).size(), 0u);
  }
}

TEST_F(IndexedDatasetTest, FloatDatasetsStoreExactValues) {
  build(path("f"), DType::kDouble, DatasetImpl::kMmap, {{{1, -2, 70000}}});
  const std::string bin = read_file(path("f.bin"));
  ASSERT_EQ(bin.size(), 24u);
  double third = 0;
  std::memcpy(&third, bin.data() + 16, 8);
  EXPECT_EQ(third, 70000.0);
  EXPECT_EQ(read_file(path("f.idx"))[17], 7);
  const IndexedDataset dataset = IndexedDataset::open(path("f"));
  EXPECT_NE(error_of([&] { dataset.get(0); }).find("holds no token ids"), std::string::npos);
}

TEST_F(IndexedDatasetTest, LegacyDatasetsReadBack) {
  build(path("c"), DType::kInt32, DatasetImpl::kCached, {{{1, 2}, {3}}, {{70000}}});
  const IndexedDataset dataset = IndexedDataset::open(path("c"));
  EXPECT_EQ(dataset.index().impl, DatasetImpl::kCached);
  EXPECT_EQ(dataset.index().pointers, (std::vector<std::int64_t>{0, 8, 12}));
  EXPECT_EQ(dataset.get(2), std::vector<std::int64_t>{70000});
  EXPECT_EQ(infer_dataset_impl(path("c")), DatasetImpl::kCached);
}

TEST_F(IndexedDatasetTest, GetChecksBounds) {
  build(path("t"), DType::kUInt16, DatasetImpl::kMmap, kTinyDocs);
  const IndexedDataset dataset = IndexedDataset::open(path("t"));
  EXPECT_NE(error_of([&] { dataset.get(2); }).find("sequence 2 is out of range (2 sequences)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dataset.get(0, 4); }).find("outside sequence 0 of 3 tokens"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dataset.get(0, 2, 2); }).find("tokens [2, 4)"), std::string::npos);
}

TEST_F(IndexedDatasetTest, OpenReportsMissingFiles) {
  build(path("t"), DType::kUInt16, DatasetImpl::kMmap, kTinyDocs);
  fs::remove(path("t.bin"));
  std::string message = error_of([&] { IndexedDataset::open(path("t")); });
  EXPECT_NE(
      message.find("dataset " + path("t") + " does not exist: " + path("t.bin") + " is missing"),
      std::string::npos)
      << message;
  message = error_of([&] { IndexedDataset::open(path("nothing")); });
  EXPECT_NE(message.find(path("nothing.idx") + " is missing"), std::string::npos) << message;
}

TEST_F(IndexedDatasetTest, OpenChecksBinAgainstIndex) {
  write_dataset("short", unhex(kTinyIdx), unhex(kTinyBin).substr(0, 11));
  std::string message = error_of([&] { IndexedDataset::open(path("short")); });
  EXPECT_NE(message.find(path("short.bin") + " is truncated"), std::string::npos) << message;
  write_dataset("long", unhex(kTinyIdx), unhex(kTinyBin) + "xx");
  message = error_of([&] { IndexedDataset::open(path("long")); });
  EXPECT_NE(message.find(path("long.bin") + " has 2 extra bytes"), std::string::npos) << message;
}

TEST_F(IndexedDatasetTest, InferReadsTheMagic) {
  write_dataset("mm", unhex(kTinyIdx), unhex(kTinyBin));
  write_dataset("junk", "hello world", "");
  write_dataset("short", "MMID", "");
  write_file(path("nine.idx"), std::string("MMIDIDX\0\x07", 9));
  EXPECT_EQ(infer_dataset_impl(path("mm")), DatasetImpl::kMmap);
  EXPECT_EQ(infer_dataset_impl(path("junk")), std::nullopt);
  EXPECT_EQ(infer_dataset_impl(path("short")), std::nullopt);
  EXPECT_EQ(infer_dataset_impl(path("nine")), DatasetImpl::kMmap);  // 8 bytes, as upstream
  const std::string message = error_of([&] { infer_dataset_impl(path("absent")); });
  EXPECT_NE(message.find("cannot open " + path("absent.idx")), std::string::npos) << message;
}

// --- writing -----------------------------------------------------------------------------------

TEST_F(IndexedDatasetTest, OutOfRangeTokenNamesValueAndDtype) {
  const std::vector<std::tuple<DType, std::int32_t, std::string>> cases = {
      {DType::kUInt16, 70000, "token 70000 does not fit dtype uint16 (range 0..65535)"},
      {DType::kUInt16, -1, "token -1 does not fit dtype uint16"},
      {DType::kUInt8, 256, "token 256 does not fit dtype uint8 (range 0..255)"},
      {DType::kInt8, -129, "token -129 does not fit dtype int8 (range -128..127)"},
      {DType::kInt16, 40000, "token 40000 does not fit dtype int16 (range -32768..32767)"},
  };
  for (const auto& [dtype, token, expected] : cases) {
    SCOPED_TRACE(expected);
    {
      IndexedDatasetBuilder builder(path("out"), dtype, DatasetImpl::kMmap);
      builder.add_item(std::vector<std::int32_t>{1, 2});
      const std::vector<std::int32_t> bad = {3, token, 4};
      const std::string message = error_of([&] { builder.add_item(bad); });
      EXPECT_NE(message.find(expected), std::string::npos) << message;
      EXPECT_EQ(builder.num_sequences(), 1u);  // the failed item left no trace
      EXPECT_EQ(builder.num_tokens(), 2u);
    }
    EXPECT_TRUE(files().empty());
  }
}

TEST_F(IndexedDatasetTest, FailedItemDoesNotCorruptTheFile) {
  IndexedDatasetBuilder builder(path("t"), DType::kUInt16, DatasetImpl::kMmap);
  builder.add_item(std::vector<std::int32_t>{15496, 995, 50256});
  EXPECT_THROW(builder.add_item(std::vector<std::int32_t>{1, 65536}), base::Error);
  builder.end_document();
  builder.add_item(std::vector<std::int32_t>{1026, 338, 50256});
  builder.end_document();
  builder.finalize();
  EXPECT_EQ(hex(read_file(path("t.idx"))), kTinyIdx);
  EXPECT_EQ(hex(read_file(path("t.bin"))), kTinyBin);
}

TEST_F(IndexedDatasetTest, BuilderWithoutFinalizeLeavesNothing) {
  {
    IndexedDatasetBuilder builder(path("t"), DType::kUInt16, DatasetImpl::kMmap);
    builder.add_item(std::vector<std::int32_t>(100000, 7));
    builder.end_document();
    EXPECT_EQ(files().size(), 1u);  // the temporary .bin
  }
  EXPECT_TRUE(files().empty());
}

TEST_F(IndexedDatasetTest, FinalizeReplacesAnExistingDataset) {
  build(path("t"), DType::kInt32, DatasetImpl::kMmap, {{{1, 2, 3, 4, 5, 6, 7}}});
  build(path("t"), DType::kUInt16, DatasetImpl::kMmap, kTinyDocs);
  EXPECT_EQ(hex(read_file(path("t.idx"))), kTinyIdx);
  EXPECT_EQ(hex(read_file(path("t.bin"))), kTinyBin);
  EXPECT_EQ(files(), (std::vector<std::string>{"t.bin", "t.idx"}));
}

TEST_F(IndexedDatasetTest, FinalizeTwiceFails) {
  IndexedDatasetBuilder builder(path("t"), DType::kUInt16, DatasetImpl::kMmap);
  builder.finalize();
  EXPECT_NE(error_of([&] { builder.finalize(); }).find("finalize called twice"), std::string::npos);
  EXPECT_THROW(builder.add_item(std::vector<std::int32_t>{1}), base::Error);
}

TEST_F(IndexedDatasetTest, UnwritableFolderFailsClearly) {
  const std::string message = error_of([&] {
    IndexedDatasetBuilder builder(path("no/such/dir/t"), DType::kUInt16, DatasetImpl::kMmap);
  });
  EXPECT_NE(message.find("cannot create " + path("no/such/dir/t.bin")), std::string::npos)
      << message;
}

TEST_F(IndexedDatasetTest, AppendDatasetConcatenates) {
  build(path("a"), DType::kUInt16, DatasetImpl::kMmap, {{{15496, 995, 50256}}});
  build(path("b"), DType::kUInt16, DatasetImpl::kMmap, {{{1026, 338, 50256}}});
  build(path("e"), DType::kUInt16, DatasetImpl::kMmap, {});
  {
    IndexedDatasetBuilder builder(path("ab"), DType::kUInt16, DatasetImpl::kMmap);
    builder.append_dataset(IndexedDataset::open(path("a")));
    builder.append_dataset(IndexedDataset::open(path("e")));
    builder.append_dataset(IndexedDataset::open(path("b")));
    EXPECT_EQ(builder.num_documents(), 2u);
    EXPECT_EQ(builder.num_tokens(), 6u);
    builder.finalize();
  }
  EXPECT_EQ(hex(read_file(path("ab.idx"))), kTinyIdx);
  EXPECT_EQ(hex(read_file(path("ab.bin"))), kTinyBin);

  // Mixed: items added directly, then a dataset appended (its doc_idx shifted by 1 sequence).
  IndexedDatasetBuilder builder(path("mixed"), DType::kUInt16, DatasetImpl::kMmap);
  builder.add_item(std::vector<std::int32_t>{10, 11});
  builder.end_document();
  builder.append_dataset(IndexedDataset::open(path("ab")));
  builder.finalize();
  const IndexedDataset mixed = IndexedDataset::open(path("mixed"));
  EXPECT_EQ(mixed.index().doc_idx, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(mixed.get(2), (std::vector<std::int64_t>{1026, 338, 50256}));

  IndexedDatasetBuilder wide(path("w"), DType::kInt32, DatasetImpl::kMmap);
  const std::string message =
      error_of([&] { wide.append_dataset(IndexedDataset::open(path("a"))); });
  EXPECT_NE(message.find("dataset " + path("a") + " has dtype uint16 but " + path("w") +
                         " is being written as int32"),
            std::string::npos)
      << message;
}

TEST_F(IndexedDatasetTest, LargeUint16ItemsRoundTrip) {
  std::vector<std::int32_t> tokens(1 << 20);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<std::int32_t>(i * 7919 % 65536);
  build(path("big"), DType::kUInt16, DatasetImpl::kMmap, {{tokens}, {tokens, tokens}});
  const IndexedDataset dataset = IndexedDataset::open(path("big"));
  EXPECT_EQ(dataset.index().pointers, (std::vector<std::int64_t>{0, 1 << 21, 2 << 21}));
  const std::vector<std::int64_t> back = dataset.get(2);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), tokens.begin()));
}

}  // namespace
}  // namespace mds::io
