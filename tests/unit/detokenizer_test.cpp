// The detokenizers of upstream's zero-shot evaluation against data.md §8.6, and the Python string
// helpers whose definitions they rely on.
#include <gtest/gtest.h>

#include "base/python_float.h"
#include "tasks/detokenizer.h"
#include "tasks/json_text.h"
#include "tasks/python_text.h"

namespace mds::tasks {
namespace {

TEST(DetokenizerTest, WikitextVectors) {
  EXPECT_EQ(wikitext_detokenize(" = Robert Boulter = \n"), " = Robert Boulter =\n");
  EXPECT_EQ(wikitext_detokenize(" = = Career = = \n"), " == Career ==\n");
  EXPECT_EQ(
      wikitext_detokenize("the 1 @,@ 000 @-@ year old 's car , which cost $ 5 @.@ 5 million . \n"),
      "the 1,000-year old's car, which cost $ 5.5 million.\n");
  EXPECT_EQ(wikitext_detokenize(" ( born 1990 ) and [ sic ] { x } \" quoted text \" ' single ' \n"),
            " (born 1990) and [sic] {x} \"quoted text\"'single'\n");
  EXPECT_EQ(wikitext_detokenize("The temperature was 5 \u00b0 C ; really ! why ? yes : no \n"),
            "The temperature was 5\u00b0C; really! why? yes: no\n");
  EXPECT_EQ(wikitext_detokenize("players ' boots and N items"), "players' boots and 1 items");
  EXPECT_EQ(wikitext_detokenize("= = = = Deep = = = ="), "==== Deep ====");
  EXPECT_EQ(wikitext_detokenize("a /' 5/ b"), "a /'[0-9]/ b");
}

TEST(DetokenizerTest, BracketRulesFollowPythonRegex) {
  // The lazy group stops at the first closer; an opener without a closer is left alone.
  EXPECT_EQ(wikitext_detokenize("( a ( b ) c )"), "(a ( b) c )");
  EXPECT_EQ(wikitext_detokenize("x ( y"), "x ( y");
  EXPECT_EQ(wikitext_detokenize("(   )"), "()");
  // \s is Python's whitespace: U+00A0 and U+001F are stripped inside brackets, newlines too.
  EXPECT_EQ(wikitext_detokenize("[\u00a0a\x1f]"), "[a]");
  EXPECT_EQ(wikitext_detokenize("(\na\n)"), "(a)");
}

TEST(DetokenizerTest, PtbAndLambada) {
  EXPECT_EQ(ptb_detokenize("it 's a N dollar $ 1 # 1 \n do n't"), "it's a1 dollar $1 #1\ndon't");
  EXPECT_EQ(detokenize(Detokenizer::kLambada, " a , b "), " a , b ");
}

TEST(DetokenizerTest, SelectionByPath) {
  EXPECT_EQ(detokenizer_for_path("data/wikitext-103/wiki.test.tokens"), Detokenizer::kWikitext);
  EXPECT_EQ(detokenizer_for_path("lambada_test.jsonl"), Detokenizer::kLambada);
  EXPECT_EQ(detokenizer_for_path("ptb.test.txt"), Detokenizer::kPtb);
  EXPECT_EQ(detokenizer_for_path("foo.txt"), std::nullopt);
  EXPECT_EQ(detokenizer_for_path("data/eval/wikitext-2-test.txt"), Detokenizer::kWikitext);
  // "ptb" is checked first.
  EXPECT_EQ(detokenizer_for_path("wiki/ptb.txt"), Detokenizer::kPtb);
}

TEST(PythonTextTest, StripSplitAndSpaces) {
  EXPECT_EQ(python_strip("\x1c a b \u3000\n"), "a b");
  EXPECT_EQ(python_strip(" \t "), "");
  const std::vector<std::string_view> words = python_split(" a\u00a0b\n\nc\u2028 ");
  ASSERT_EQ(words.size(), 3u);
  EXPECT_EQ(words[0], "a");
  EXPECT_EQ(words[1], "b");
  EXPECT_EQ(words[2], "c");
  EXPECT_TRUE(is_python_space(0x1F));
  EXPECT_FALSE(is_python_space(0x200B));  // zero-width space is not whitespace in Python
  EXPECT_EQ(code_point_count("caf\u00e9 \U0001F600"), 6u);
}

TEST(PythonTextTest, FloatFormatting) {
  EXPECT_EQ(format_e4(3.21884), "3.2188E+00");
  EXPECT_EQ(format_e4(49734.157), "4.9734E+04");
  EXPECT_EQ(format_e4(0.0), "0.0000E+00");
  EXPECT_EQ(base::python_float_repr(1.096068796068796), "1.096068796068796");
  EXPECT_EQ(base::python_float_repr(2.0), "2.0");
  EXPECT_EQ(base::python_float_repr(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(base::python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(base::python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(base::python_float_repr(1e16), "1e+16");
  EXPECT_EQ(base::python_float_repr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(base::python_float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(base::python_float_repr(-0.5), "-0.5");
}

TEST(PythonTextTest, JsonDumpsStrings) {
  EXPECT_EQ(json_string("a\"b\\c\n\t\x01\x7f"), "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f\"");
  EXPECT_EQ(json_string("caf\u00e9 \U0001F600"), "\"caf\\u00e9 \\ud83d\\ude00\"");
  EXPECT_EQ(json_number(0.5), "0.5");
}

}  // namespace
}  // namespace mds::tasks
