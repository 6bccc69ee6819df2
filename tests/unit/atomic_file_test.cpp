#include "base/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "test_support.h"

namespace mds::base {
namespace {

using testing_support::read_file;
using testing_support::ScratchDir;
using testing_support::write_file;

TEST(AtomicFile, AppearsOnlyAfterCommit) {
  const ScratchDir dir;
  const std::string path = dir.file("out.bin");
  {
    AtomicFile file(path);
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
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(AtomicFile, LeavesNothingWhenAbandoned) {
  const ScratchDir dir;
  {
    AtomicFile file(dir.file("out.bin"));
    file.write("partial", 7);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(AtomicFile, ReplacesAnExistingFile) {
  const ScratchDir dir;
  const std::string path = dir.file("out.bin");
  write_file(path, "old");
  AtomicFile file(path);
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
