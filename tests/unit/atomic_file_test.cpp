#include "base/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace mds::base {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::path(testing::TempDir()) / ("mds_atomic_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(AtomicFile, AppearsOnlyAfterCommit) {
  const auto dir = fresh_dir("commit");
  const auto path = dir / "out.bin";
  {
    AtomicFile file(path.string());
    file.write("abc", 3);
    std::string big(3 << 20, 'x');  // larger than the internal buffer
    file.write(big.data(), big.size());
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_EQ(file.bytes_written(), 3 + big.size());
    file.commit();
  }
  const std::string content = read_file(path);
  EXPECT_EQ(content.size(), 3u + (3u << 20));
  EXPECT_EQ(content.substr(0, 4), "abcx");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
}

TEST(AtomicFile, LeavesNothingWhenAbandoned) {
  const auto dir = fresh_dir("abandon");
  {
    AtomicFile file((dir / "out.bin").string());
    file.write("partial", 7);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(AtomicFile, ReplacesAnExistingFile) {
  const auto dir = fresh_dir("replace");
  const auto path = dir / "out.bin";
  std::ofstream(path) << "old";
  AtomicFile file(path.string());
  file.write("new", 3);
  EXPECT_EQ(read_file(path), "old");
  file.commit();
  EXPECT_EQ(read_file(path), "new");
}

TEST(AtomicFile, NamesTheFileWhenItCannotBeCreated) {
  try {
    AtomicFile file("/nonexistent-dir/out.bin");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/out.bin"), std::string::npos);
  }
}

}  // namespace
}  // namespace mds::base
