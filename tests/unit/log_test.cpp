#include "base/log.h"

#include <gtest/gtest.h>

#include <string>

namespace mds::base {
namespace {

std::string contents(std::FILE* file) {
  std::rewind(file);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file))
    text.push_back(static_cast<char>(c));
  return text;
}

TEST(Log, SeparatesResultsFromNotesAndWarnings) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  ASSERT_TRUE(out && err);
  const Log log("prog", out, err);
  log.info("Processed 3 lines");
  log.note("--merge distributed merges serially here");
  log.warn("--keep-newlines has no effect");
  EXPECT_EQ(contents(out), "Processed 3 lines\n");
  EXPECT_EQ(contents(err),
            "prog: note: --merge distributed merges serially here\n"
            "prog: warning: --keep-newlines has no effect\n");
  std::fclose(out);
  std::fclose(err);
}

}  // namespace
}  // namespace mds::base
