// merge_datasets against data.md §3 (the verified 142-byte example) and its failure behaviour:
// every rejected merge names the input at fault and leaves no output or temporary file behind.
#include "io/merge_datasets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/indexed_dataset.h"
#include "test_support.h"

namespace mds::io {
namespace {

namespace fs = std::filesystem;
using testing_support::hex;
using testing_support::read_file;
using testing_support::ScratchDir;
using testing_support::write_file;

constexpr const char* kMergedIdx =
    "4d4d49444944580000010000000000000008050000000000000006000000000000000300000003000000020000"
    "000300000003000000000000000000000006000000000000000c000000000000001000000000000000160000000000"
    "0000000000000000000001000000000000000200000000000000030000000000000004000000000000000500000000"
    "000000";
constexpr const char* kMergedBin = "883ce30350c40204520150c4410050c4883ce30350c40204520150c4";

using Documents = std::vector<std::vector<std::vector<std::int32_t>>>;
const Documents kTinyDocs = {{{15496, 995, 50256}}, {{1026, 338, 50256}}};

void build(const std::string& prefix, DType dtype, DatasetImpl impl, const Documents& documents) {
  IndexedDatasetBuilder builder(prefix, dtype, impl);
  for (const auto& document : documents) {
    for (const auto& sequence : document) builder.add_item(sequence);
    builder.end_document();
  }
  builder.finalize();
}

class MergeDatasetsTest : public testing::Test {
 protected:
  void SetUp() override {
    build(path("tiny"), DType::kUInt16, DatasetImpl::kMmap, kTinyDocs);
    build(path("b"), DType::kUInt16, DatasetImpl::kMmap, {{{65, 50256}}});
  }

  std::string path(const std::string& name) const { return dir_.file(name); }
  std::vector<std::string> files() const { return dir_.files(); }

  // Runs a merge into "out" that must fail; returns its message after checking that no file
  // appeared (neither out.bin/out.idx nor a temporary).
  std::string failed_merge(const std::vector<std::string>& names) {
    const std::vector<std::string> before = files();
    std::vector<std::string> prefixes;
    for (const std::string& name : names) prefixes.push_back(path(name));
    std::string message;
    try {
      merge_datasets(prefixes, path("out"));
      ADD_FAILURE() << "merge succeeded";
    } catch (const base::Error& e) {
      message = e.what();
    }
    EXPECT_EQ(files(), before) << message;
    return message;
  }

  ScratchDir dir_;
};

TEST_F(MergeDatasetsTest, SpecExampleIs142Bytes) {
  std::vector<std::string> seen;
  const MergeSummary summary = merge_datasets(
      {path("tiny"), path("b"), path("tiny")}, path("out"),
      [&](std::size_t k, const std::string& prefix, std::uint64_t total) {
        seen.push_back(std::to_string(k) + " " + fs::path(prefix).filename().string() + " " +
                       std::to_string(total));
      });
  EXPECT_EQ(hex(read_file(path("out.idx"))), kMergedIdx);
  EXPECT_EQ(hex(read_file(path("out.bin"))), kMergedBin);
  EXPECT_EQ(read_file(path("out.idx")).size(), 142u);
  EXPECT_EQ(seen, (std::vector<std::string>{"0 tiny 2", "1 b 3", "2 tiny 5"}));
  EXPECT_EQ(summary.datasets, 3u);
  EXPECT_EQ(summary.documents, 5u);
  EXPECT_EQ(summary.sequences, 5u);
  EXPECT_EQ(summary.tokens, 14u);
  EXPECT_EQ(summary.bin_bytes, 28u);
  EXPECT_EQ(files(), (std::vector<std::string>{"b.bin", "b.idx", "out.bin", "out.idx", "tiny.bin",
                                               "tiny.idx"}));
}

TEST_F(MergeDatasetsTest, MergingPartsEqualsBuildingTheWhole) {
  // Sentence-level documents and an empty dataset in between: doc_idx must shift by sequences.
  const Documents part1 = {{{10, 11}, {12, 13, 14}}, {{15}}};
  const Documents part2 = {{{16}}, {{17, 18}, {19}, {20, 21, 22}}};
  Documents whole = part1;
  whole.insert(whole.end(), part2.begin(), part2.end());
  build(path("p1"), DType::kUInt16, DatasetImpl::kMmap, part1);
  build(path("p0"), DType::kUInt16, DatasetImpl::kMmap, {});
  build(path("p2"), DType::kUInt16, DatasetImpl::kMmap, part2);
  build(path("whole"), DType::kUInt16, DatasetImpl::kMmap, whole);
  merge_datasets({path("p1"), path("p0"), path("p2")}, path("out"));
  EXPECT_EQ(read_file(path("out.idx")), read_file(path("whole.idx")));
  EXPECT_EQ(read_file(path("out.bin")), read_file(path("whole.bin")));
  const IndexedDataset merged = IndexedDataset::open(path("out"));
  EXPECT_EQ(merged.index().doc_idx, (std::vector<std::int64_t>{0, 2, 3, 4, 7}));
}

TEST_F(MergeDatasetsTest, SingleInputIsCopiedExactly) {
  merge_datasets({path("tiny")}, path("out"));
  EXPECT_EQ(read_file(path("out.idx")), read_file(path("tiny.idx")));
  EXPECT_EQ(read_file(path("out.bin")), read_file(path("tiny.bin")));
}

TEST_F(MergeDatasetsTest, EmptyInputsGiveTheEmptyDataset) {
  build(path("e1"), DType::kUInt16, DatasetImpl::kMmap, {});
  build(path("e2"), DType::kUInt16, DatasetImpl::kMmap, {});
  const MergeSummary summary = merge_datasets({path("e1"), path("e2")}, path("out"));
  EXPECT_EQ(read_file(path("out.idx")), read_file(path("e1.idx")));
  EXPECT_EQ(read_file(path("out.bin")).size(), 0u);
  EXPECT_EQ(summary.documents, 0u);
}

TEST_F(MergeDatasetsTest, LegacyDatasetsMerge) {
  build(path("c1"), DType::kInt32, DatasetImpl::kCached, kTinyDocs);
  build(path("c2"), DType::kInt32, DatasetImpl::kCached, {{{65}, {66, 50256}}});
  build(path("cwhole"), DType::kInt32, DatasetImpl::kCached,
        {{{15496, 995, 50256}}, {{1026, 338, 50256}}, {{65}, {66, 50256}}});
  merge_datasets({path("c1"), path("c2")}, path("out"));
  EXPECT_EQ(hex(read_file(path("out.idx"))), hex(read_file(path("cwhole.idx"))));
  EXPECT_EQ(read_file(path("out.bin")), read_file(path("cwhole.bin")));
  const IndexedDataset merged = IndexedDataset::open(path("out"));
  EXPECT_EQ(merged.index().impl, DatasetImpl::kCached);
  EXPECT_EQ(merged.index().doc_idx, (std::vector<std::int64_t>{0, 1, 2, 4}));
  EXPECT_EQ(merged.get(3), (std::vector<std::int64_t>{66, 50256}));
}

TEST_F(MergeDatasetsTest, Int32MmapKeepsDtype) {
  build(path("w1"), DType::kInt32, DatasetImpl::kMmap, {{{70000, 1}}});
  build(path("w2"), DType::kInt32, DatasetImpl::kMmap, {{{2}}});
  merge_datasets({path("w1"), path("w2")}, path("out"));
  const IndexedDataset merged = IndexedDataset::open(path("out"));
  EXPECT_EQ(merged.index().dtype, DType::kInt32);
  EXPECT_EQ(merged.index().pointers, (std::vector<std::int64_t>{0, 8}));
}

TEST_F(MergeDatasetsTest, ReplacesAnExistingOutput) {
  merge_datasets({path("b")}, path("out"));
  merge_datasets({path("tiny"), path("b"), path("tiny")}, path("out"));
  EXPECT_EQ(hex(read_file(path("out.idx"))), kMergedIdx);
  EXPECT_EQ(hex(read_file(path("out.bin"))), kMergedBin);
}

// --- failures ----------------------------------------------------------------------------------

TEST_F(MergeDatasetsTest, MissingBin) {
  build(path("c"), DType::kUInt16, DatasetImpl::kMmap, kTinyDocs);
  fs::remove(path("c.bin"));
  const std::string message = failed_merge({"tiny", "c"});
  EXPECT_NE(
      message.find("dataset " + path("c") + " does not exist: " + path("c.bin") + " is missing"),
      std::string::npos)
      << message;
}

TEST_F(MergeDatasetsTest, MissingIdx) {
  const std::string message = failed_merge({"tiny", "nope"});
  EXPECT_NE(message.find("dataset " + path("nope") + " does not exist: " + path("nope.idx") +
                         " is missing"),
            std::string::npos)
      << message;
}

TEST_F(MergeDatasetsTest, PrefixWithExtensionIsMissing) {
  const std::string message = failed_merge({"tiny.bin"});
  EXPECT_NE(message.find("give the path without .bin/.idx"), std::string::npos) << message;
}

TEST_F(MergeDatasetsTest, BadMagicInFirstDataset) {
  write_file(path("junk.idx"), "{\"text\": \"not an index\"}\n");
  write_file(path("junk.bin"), "");
  const std::string message = failed_merge({"junk", "tiny"});
  EXPECT_NE(message.find(path("junk.idx") + ": unknown dataset implementation"), std::string::npos)
      << message;
}

TEST_F(MergeDatasetsTest, BadMagicInLaterDatasetIsAnImplMismatch) {
  write_file(path("junk.idx"), "garbage!garbage!");
  write_file(path("junk.bin"), "");
  const std::string message = failed_merge({"tiny", "junk"});
  EXPECT_NE(message.find("Dataset type 'unknown' in file '" + path("junk") +
                         "' does not match type 'mmap' from file '" + path("tiny") + "'"),
            std::string::npos)
      << message;
}

TEST_F(MergeDatasetsTest, BadNinthMagicByte) {
  std::string idx = read_file(path("b.idx"));
  idx[8] = 'X';
  write_file(path("b.idx"), idx);
  const std::string message = failed_merge({"tiny", "b"});
  EXPECT_NE(message.find(path("b.idx") + ": bad magic"), std::string::npos) << message;
}

TEST_F(MergeDatasetsTest, TruncatedIdx) {
  const std::string idx = read_file(path("b.idx"));
  write_file(path("b.idx"), idx.substr(0, idx.size() - 3));
  const std::string message = failed_merge({"tiny", "b"});
  EXPECT_NE(message.find(path("b.idx") + ": truncated"), std::string::npos) << message;
}

TEST_F(MergeDatasetsTest, TruncatedBin) {
  write_file(path("b.bin"), read_file(path("b.bin")).substr(0, 3));
  const std::string message = failed_merge({"tiny", "tiny", "b"});
  EXPECT_NE(message.find(path("b.bin") + " is truncated: " + path("b.idx") +
                         " describes 4 bytes of tokens, the file has 3"),
            std::string::npos)
      << message;
}

TEST_F(MergeDatasetsTest, OverlongBin) {
  write_file(path("b.bin"), read_file(path("b.bin")) + "\x01\x02");
  const std::string message = failed_merge({"b", "tiny"});
  EXPECT_NE(message.find(path("b.bin") + " has 2 extra bytes"), std::string::npos) << message;
}

TEST_F(MergeDatasetsTest, DtypeMismatch) {
  build(path("wide"), DType::kInt32, DatasetImpl::kMmap, {{{70000, 1}}});
  const std::string message = failed_merge({"tiny", "wide"});
  EXPECT_NE(message.find("dataset " + path("wide") + " has dtype int32 but the merged dataset " +
                         "has dtype uint16 (from " + path("tiny") + ")"),
            std::string::npos)
      << message;
}

TEST_F(MergeDatasetsTest, LegacyInputsMustBeInt32) {
  DatasetIndex index;
  index.impl = DatasetImpl::kCached;
  index.dtype = DType::kInt16;
  index.sizes = {1};
  index.doc_idx = {0, 1};
  write_file(path("l16.idx"), serialize_index(index));
  write_file(path("l16.bin"), std::string("\x05\x00", 2));
  const std::string message = failed_merge({"l16"});
  EXPECT_NE(message.find("has dtype int16 but the merged dataset has dtype int32 (legacy"),
            std::string::npos)
      << message;
}

TEST_F(MergeDatasetsTest, ImplMismatch) {
  build(path("c"), DType::kInt32, DatasetImpl::kCached, kTinyDocs);
  std::string message = failed_merge({"tiny", "c"});
  EXPECT_NE(message.find("Dataset type 'cached' in file '" + path("c") +
                         "' does not match type 'mmap' from file '" + path("tiny") + "'"),
            std::string::npos)
      << message;
  message = failed_merge({"c", "b"});
  EXPECT_NE(message.find("Dataset type 'mmap' in file '" + path("b") +
                         "' does not match type 'cached' from file '" + path("c") + "'"),
            std::string::npos)
      << message;
}

TEST_F(MergeDatasetsTest, OutputEqualToAnInputIsRefused) {
  std::vector<std::string> before = files();
  for (const std::string& output : {path("b"), (dir_.path() / "." / "b").string()}) {
    SCOPED_TRACE(output);
    try {
      merge_datasets({path("tiny"), path("b")}, output);
      ADD_FAILURE() << "merge succeeded";
    } catch (const base::Error& e) {
      EXPECT_NE(std::string(e.what()).find("is also the input dataset " + path("b")),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(files(), before);
  EXPECT_EQ(read_file(path("b.bin")).size(), 4u);
  // A hard link to an input is the same file under another name.
  fs::create_hard_link(path("b.idx"), path("alias.idx"));
  before = files();
  EXPECT_THROW(merge_datasets({path("b")}, path("alias")), base::Error);
  EXPECT_EQ(files(), before);
}

TEST_F(MergeDatasetsTest, NoDatasets) {
  EXPECT_THROW(merge_datasets({}, path("out")), base::Error);
  EXPECT_EQ(files().size(), 4u);
}

}  // namespace
}  // namespace mds::io
