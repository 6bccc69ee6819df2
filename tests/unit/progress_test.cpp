#include "base/progress.h"

#include <gtest/gtest.h>

namespace mds::base {
namespace {

TEST(Progress, KeepsUpstreamLineTextAndAddsEta) {
  ProgressSnapshot s;
  s.items = 1000;
  s.bytes = 2 * 1048576;
  s.seconds = 2.0;
  EXPECT_EQ(format_progress(s, "documents"), "Processed 1000 documents (500.0 docs/s, 1.00 MB/s).");
  s.raw_bytes = 250;
  s.raw_total = 1000;
  EXPECT_EQ(format_progress(s, "documents"),
            "Processed 1000 documents (500.0 docs/s, 1.00 MB/s), 25.0% of input, ETA 0:00:06.");
}

TEST(Progress, PrintsPeriodicLinesWhenNotATerminal) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  Progress progress(
      {.unit = "documents", .raw_total = std::nullopt, .log_interval = 10, .min_seconds = 0.0},
      out);
  progress.update(5, 0, 0);   // below the interval: nothing
  progress.update(10, 0, 0);  // a line
  progress.update(15, 0, 0);  // nothing until 20
  progress.update(25, 0, 0);  // a line
  progress.finish();
  std::rewind(out);
  char buffer[512] = {};
  const std::size_t n = std::fread(buffer, 1, sizeof buffer - 1, out);
  std::fclose(out);
  const std::string text(buffer, n);
  EXPECT_EQ(text.find("Processed 5 "), std::string::npos);
  EXPECT_NE(text.find("Processed 10 documents"), std::string::npos);
  EXPECT_NE(text.find("Processed 25 documents"), std::string::npos);
  EXPECT_EQ(text.find("Processed 15 "), std::string::npos);
}

}  // namespace
}  // namespace mds::base
