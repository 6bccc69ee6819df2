#include "base/text.h"

#include <gtest/gtest.h>

namespace mds {
namespace {

TEST(BaseText, TrimmedDropsBlanksAtBothEndsOnly) {
  EXPECT_EQ(base::trimmed("  a b\t\r\n"), "a b");
  EXPECT_EQ(base::trimmed("\ta\n b "), "a\n b");
  EXPECT_EQ(base::trimmed("x"), "x");
  EXPECT_EQ(base::trimmed(" \t\r\n"), "");
  EXPECT_EQ(base::trimmed(""), "");
}

}  // namespace
}  // namespace mds
