// ops::GemmTuningFile (pretrain --gemm-tuning-file): choices kept and found again by a later run
// on the same platform, the file rewritten whole after each, refused on another platform, and
// one line naming the file and line for anything malformed.
#include "ops/gemm_tuning_file.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/test_support.h"

namespace mds {
namespace {

using testing_support::one_line_error;
using testing_support::read_file;
using testing_support::ScratchDir;
using testing_support::write_file;

constexpr const char* kPlatform = "NVIDIA H100 80GB HBM3, cuBLASLt 130000";
const std::string kKey = "m=8192 n=2304 k=768 lda=768 ldb=768 ldc=2304";

TEST(GemmTuningFile, StartsEmptyWithoutAFileAndWritesNothingUntilAChoice) {
  const ScratchDir dir;
  const ops::GemmTuningFile choices(dir.file("gemms.txt"), kPlatform);
  EXPECT_EQ(choices.size(), 0u);
  EXPECT_FALSE(choices.find(kKey).has_value());
  EXPECT_TRUE(dir.files().empty());
}

TEST(GemmTuningFile, ChoicesComeBackInALaterRunOnTheSamePlatform) {
  const ScratchDir dir;
  const std::string path = dir.file("gemms.txt");
  {
    ops::GemmTuningFile choices(path, kPlatform);
    choices.record(kKey, 3, {0.0412f, 0.0398f, 0.0401f, 0.0387f});
    choices.record("m=1 n=2 k=3", 0, {0.01f});
    choices.record(kKey, 2, {0.0412f, 0.0398f, 0.0385f});  // a key chosen again: the last wins
  }
  EXPECT_EQ(dir.files(), std::vector<std::string>{"gemms.txt"});  // no temporary left behind
  const std::string text = read_file(path);
  EXPECT_NE(text.find(std::string("platform = ") + kPlatform + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("2 | " + kKey + " | 0.0412 0.0398 0.0385\n"), std::string::npos) << text;
  const ops::GemmTuningFile again(path, kPlatform);
  EXPECT_EQ(again.size(), 2u);
  EXPECT_EQ(again.find(kKey), 2);
  EXPECT_EQ(again.find("m=1 n=2 k=3"), 0);
  EXPECT_FALSE(again.find("m=1 n=2 k=4").has_value());
}

TEST(GemmTuningFile, AnotherPlatformsFileIsRefused) {
  const ScratchDir dir;
  const std::string path = dir.file("gemms.txt");
  ops::GemmTuningFile(path, kPlatform).record(kKey, 1, {0.1f, 0.2f});
  const std::string error =
      one_line_error([&] { ops::GemmTuningFile(path, "NVIDIA H200, cuBLASLt 130000"); });
  EXPECT_NE(error.find(path + ":4: "), std::string::npos) << error;
  EXPECT_NE(error.find("remove the file"), std::string::npos) << error;
}

TEST(GemmTuningFile, MalformedLinesNameTheFileAndLine) {
  const ScratchDir dir;
  const std::string path = dir.file("gemms.txt");
  const std::string platform = std::string("platform = ") + kPlatform + "\n";
  const struct {
    std::string text, where, what;
  } cases[] = {
      {"# only a comment\n", path + ": ", "no \"platform"},
      {"1 | m=1 | 0.1\n" + platform, path + ":1: ", "before the \"platform"},
      {platform + "\n1 | m=1\n", path + ":3: ", "expected \"index | GEMM | times\""},
      {platform + "x | m=1 | 0.1\n", path + ":2: ", "\"x\" is not a number"},
      {platform + "-1 | m=1 | 0.1\n", path + ":2: ", "\"-1\" is not a number"},
      {platform + "1 |  | 0.1\n", path + ":2: ", "an empty GEMM"},
      {platform + "1 | m=1 | 0.1\n2 | m=1 | 0.2\n", path + ":3: ", "a second choice for m=1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    write_file(path, c.text);
    const std::string error = one_line_error([&] { ops::GemmTuningFile(path, kPlatform); });
    EXPECT_EQ(error.rfind(c.where, 0), 0u) << error;
    EXPECT_NE(error.find(c.what), std::string::npos) << error;
  }
}

TEST(GemmTuningFile, UnusablePathsFailBeforeAnyChoice) {
  const ScratchDir dir;
  const std::string missing = dir.file("no-such-folder") + "/gemms.txt";
  const std::string error = one_line_error([&] { ops::GemmTuningFile(missing, kPlatform); });
  EXPECT_NE(error.find(missing + ": its folder"), std::string::npos) << error;
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;
  const std::string folder = dir.path().string();
  EXPECT_NE(one_line_error([&] {
              ops::GemmTuningFile(folder, kPlatform);
            }).find(folder + ": not a regular file"),
            std::string::npos);
  EXPECT_TRUE(dir.files().empty());
}

TEST(GemmTuningFile, RefusesDescriptionsItCouldNotReadBack) {
  const ScratchDir dir;
  ops::GemmTuningFile choices(dir.file("gemms.txt"), kPlatform);
  EXPECT_NE(one_line_error([&] { choices.record("a | b", 0, {}); }).find("cannot keep"),
            std::string::npos);
  EXPECT_NE(one_line_error([&] { choices.record("", 0, {}); }).find("cannot keep"),
            std::string::npos);
  EXPECT_TRUE(dir.files().empty());
}

}  // namespace
}  // namespace mds
