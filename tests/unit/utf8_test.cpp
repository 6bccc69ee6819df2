#include "text/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace mds::text {
namespace {

TEST(Utf8, AcceptsValidText) {
  EXPECT_EQ(find_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("plain ascii text, long enough for the fast path"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"),
            std::nullopt);
  EXPECT_EQ(find_invalid_utf8("\xef\xbf\xbf\xf4\x8f\xbf\xbf"), std::nullopt);  // U+FFFF, U+10FFFF
}

TEST(Utf8, RejectsWhatPythonRejects) {
  EXPECT_EQ(find_invalid_utf8("ab\x80"), 2u);               // stray continuation
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);             // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xe0\x80\xaf"), 1u);        // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("\xed\xa0\x80"), 0u);         // encoded surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);     // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xf5\x80\x80\x80"), 0u);     // invalid lead byte
  EXPECT_EQ(find_invalid_utf8("0123456789\xe6\x97"), 10u);  // truncated at the end
  EXPECT_EQ(find_invalid_utf8("\xe6\x97x"), 0u);            // truncated before ASCII
}

TEST(Utf8, AppendsEveryLength) {
  std::string out;
  append_utf8(out, U'A');
  append_utf8(out, 0xE9);
  append_utf8(out, 0x65E5);
  append_utf8(out, 0x1F600);
  EXPECT_EQ(out, "A\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80");
  EXPECT_EQ(find_invalid_utf8(out), std::nullopt);
}

}  // namespace
}  // namespace mds::text
