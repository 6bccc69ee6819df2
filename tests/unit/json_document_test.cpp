#include "config/json_document.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"

namespace mds::config {
namespace {

JsonValue parse(std::string_view text, const JsonOptions& options = {}) {
  return parse_json(text, "t.json", options);
}

std::string error_of(std::string_view text, const JsonOptions& options = {}) {
  try {
    parse(text, options);
  } catch (const base::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(JsonDocument, EveryValueKind) {
  const JsonValue root = parse(
      R"({"n": null, "t": true, "f": false, "i": -42, "d": 2.5e-1, "s": "x", "a": [1, [], {}],
          "o": {"k": "v"}})");
  ASSERT_TRUE(root.is_object());
  ASSERT_EQ(root.members().size(), 8u);
  EXPECT_TRUE(root.find("n")->is_null());
  EXPECT_TRUE(root.find("t")->is_bool());
  EXPECT_TRUE(root.find("t")->as_bool());
  EXPECT_FALSE(root.find("f")->as_bool());
  const JsonValue& i = *root.find("i");
  EXPECT_TRUE(i.is_number());
  EXPECT_TRUE(i.is_int64());
  EXPECT_EQ(i.as_int64(), -42);
  EXPECT_EQ(i.as_double(), -42.0);
  const JsonValue& d = *root.find("d");
  EXPECT_FALSE(d.is_integral_literal());
  EXPECT_FALSE(d.is_int64());
  EXPECT_EQ(d.as_double(), 0.25);
  EXPECT_EQ(root.find("s")->as_string(), "x");
  const JsonValue& a = *root.find("a");
  ASSERT_TRUE(a.is_array());
  ASSERT_EQ(a.items().size(), 3u);
  EXPECT_EQ(a.items()[0].as_int64(), 1);
  EXPECT_TRUE(a.items()[1].is_array());
  EXPECT_TRUE(a.items()[1].items().empty());
  EXPECT_TRUE(a.items()[2].is_object());
  EXPECT_EQ(root.find("o")->find("k")->as_string(), "v");
  EXPECT_EQ(root.find("missing"), nullptr);
  // Scalars and empty containers are documents too; whitespace may surround them.
  EXPECT_TRUE(parse(" \t\r\n null \n").is_null());
  EXPECT_EQ(parse("\"\"").as_string(), "");
  EXPECT_TRUE(parse("[]").items().empty());
  EXPECT_TRUE(parse("{}").members().empty());
}

TEST(JsonDocument, KeepsKeyOrder) {
  const JsonValue root = parse(R"({"z": 1, "a": 2, "m": 3})");
  ASSERT_EQ(root.members().size(), 3u);
  EXPECT_EQ(root.members()[0].key, "z");
  EXPECT_EQ(root.members()[1].key, "a");
  EXPECT_EQ(root.members()[2].key, "m");
}

TEST(JsonDocument, Numbers) {
  EXPECT_EQ(parse("0").as_int64(), 0);
  EXPECT_EQ(parse("-0").as_int64(), 0);
  EXPECT_EQ(parse("9223372036854775807").as_int64(), INT64_MAX);
  EXPECT_EQ(parse("-9223372036854775808").as_int64(), INT64_MIN);
  // Integral but too large for int64: still an integer literal, with a double value.
  const JsonValue big = parse("18446744073709551615");
  EXPECT_TRUE(big.is_integral_literal());
  EXPECT_FALSE(big.is_int64());
  EXPECT_EQ(big.as_double(), 18446744073709551615.0);
  EXPECT_EQ(json_kind_name(big), "an integer");
  EXPECT_EQ(json_kind_name(parse("8.0")), "a number");
  EXPECT_EQ(parse("5e8").as_double(), 5e8);
  EXPECT_EQ(parse("1E+2").as_double(), 100.0);
  EXPECT_EQ(parse("-1.5e-3").as_double(), -1.5e-3);
  EXPECT_TRUE(std::isinf(parse("1e999").as_double()));
  EXPECT_EQ(error_of("01"), "t.json:1:2: invalid JSON: extra data after the value");
  EXPECT_EQ(error_of("-"), "t.json:1:2: invalid JSON: expected a digit");
  EXPECT_EQ(error_of("1."), "t.json:1:3: invalid JSON: expected a digit");
  EXPECT_EQ(error_of("1e+"), "t.json:1:4: invalid JSON: expected a digit");
  EXPECT_EQ(error_of("+1"), "t.json:1:1: invalid JSON: expected a value");
  EXPECT_EQ(error_of(".5"), "t.json:1:1: invalid JSON: expected a value");
  EXPECT_EQ(error_of("NaN"), "t.json:1:1: invalid JSON: expected a value");
}

TEST(JsonDocument, ValuesRememberTheirPosition) {
  const JsonValue root = parse("{\n  \"a\": [1,\n\t\"x\"],\r\n \"b\": {}\n}");
  EXPECT_EQ(root.line(), 1u);
  EXPECT_EQ(root.column(), 1u);
  const JsonMember& a = root.members()[0];
  EXPECT_EQ(a.line, 2u);
  EXPECT_EQ(a.column, 3u);
  EXPECT_EQ(a.value.line(), 2u);
  EXPECT_EQ(a.value.column(), 8u);
  EXPECT_EQ(a.value.items()[0].column(), 9u);
  EXPECT_EQ(a.value.items()[1].line(), 3u);
  EXPECT_EQ(a.value.items()[1].column(), 2u);  // columns count bytes: the tab is one
  const JsonMember& b = root.members()[1];
  EXPECT_EQ(b.value.line(), 4u);
  EXPECT_EQ(b.value.column(), 7u);
}

TEST(JsonDocument, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of(""), "t.json:1:1: invalid JSON: expected a value");
  EXPECT_EQ(error_of("\n\n  "), "t.json:3:3: invalid JSON: expected a value");
  EXPECT_EQ(error_of("{\n  \"a\": 1\n  \"b\": 2\n}"),
            "t.json:3:3: invalid JSON: expected ',' or '}'");
  EXPECT_EQ(error_of("{\"a\": 1,}"), "t.json:1:9: invalid JSON: expected a string key");
  EXPECT_EQ(error_of("{a: 1}"), "t.json:1:2: invalid JSON: expected a string key");
  EXPECT_EQ(error_of("{\"a\" 1}"), "t.json:1:6: invalid JSON: expected ':'");
  EXPECT_EQ(error_of("[1 2]"), "t.json:1:4: invalid JSON: expected ',' or ']'");
  EXPECT_EQ(error_of("[1,]"), "t.json:1:4: invalid JSON: expected a value");
  EXPECT_EQ(error_of("[tru]"), "t.json:1:2: invalid JSON: expected a value");
  EXPECT_EQ(error_of("[nul"), "t.json:1:2: invalid JSON: expected a value");
  EXPECT_EQ(error_of("{\"a\": 1"), "t.json:1:8: invalid JSON: expected ',' or '}'");
  EXPECT_EQ(error_of("// c\n{}"), "t.json:1:1: invalid JSON: expected a value");
  // Only JSON's four whitespace characters separate tokens.
  EXPECT_EQ(error_of("\f[]"), "t.json:1:1: invalid JSON: expected a value");
}

TEST(JsonDocument, TrailingDataIsAnError) {
  EXPECT_EQ(error_of("{} x"), "t.json:1:4: invalid JSON: extra data after the value");
  EXPECT_EQ(error_of("1 2"), "t.json:1:3: invalid JSON: extra data after the value");
  EXPECT_EQ(error_of("{}\n{}"), "t.json:2:1: invalid JSON: extra data after the value");
  EXPECT_EQ(error_of(std::string_view("{}\0", 3)),
            "t.json:1:3: invalid JSON: extra data after the value");
}

TEST(JsonDocument, DuplicateKeysNameTheirPath) {
  EXPECT_EQ(error_of(R"({"a": 1, "a": 2})"), "t.json:1:10: duplicate key 'a'");
  EXPECT_EQ(error_of(R"({"x": {"y": [0, {"k": 1, "k": 2}]}})"),
            "t.json:1:26: duplicate key 'x.y[1].k'");
  // Large objects take another path through the check.
  std::string many = "{";
  for (int i = 0; i < 100; ++i) many += "\"k" + std::to_string(i) + "\": 0, ";
  EXPECT_EQ(parse(many + "\"last\": 0}").members().size(), 101u);
  EXPECT_EQ(error_of(many + "\"k7\": 0}"),
            "t.json:1:" + std::to_string(many.size() + 1) + ": duplicate key 'k7'");
  // Same key in different objects is fine.
  EXPECT_NO_THROW(parse(R"({"a": {"a": 1}, "b": {"a": 2}})"));
  // Allowed on request, as Python's json.load does: find() returns the last.
  JsonOptions options;
  options.allow_duplicate_keys = true;
  const JsonValue root = parse(R"({"a": 1, "a": 2})", options);
  EXPECT_EQ(root.members().size(), 2u);
  EXPECT_EQ(root.find("a")->as_int64(), 2);
}

TEST(JsonDocument, StringEscapes) {
  EXPECT_EQ(parse(R"("\" \\ \/ \b \f \n \r \t")").as_string(), "\" \\ / \b \f \n \r \t");
  EXPECT_EQ(parse(R"("\u0041\u00e9\u20AC")").as_string(), "A\u00e9\u20ac");
  EXPECT_EQ(parse(R"("\u0000")").as_string(), std::string(1, '\0'));
  EXPECT_EQ(parse("\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"").as_string(),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(error_of(R"(["\q"])"), "t.json:1:4: invalid JSON: invalid escape");
  EXPECT_EQ(error_of(R"(["\u12G4"])"), "t.json:1:4: invalid JSON: invalid \\u escape");
  EXPECT_EQ(error_of(R"(["\u12)"), "t.json:1:4: invalid JSON: invalid \\u escape");
  EXPECT_EQ(error_of("[\"\\"), "t.json:1:4: invalid JSON: unterminated string");
  EXPECT_EQ(error_of("[\"abc"), "t.json:1:6: invalid JSON: unterminated string");
  EXPECT_EQ(error_of("[\"a\nb\"]"), "t.json:1:4: invalid JSON: control character in string");
  EXPECT_EQ(error_of("[\"a\tb\"]"), "t.json:1:4: invalid JSON: control character in string");
  // Raw bytes must be well-formed UTF-8: no stray continuation, overlong, surrogate or truncation.
  for (const char* bad : {"\"\x80\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
                          "\"\xe2\x82\"", "\"\xff\""})
    EXPECT_EQ(error_of(bad), "t.json:1:2: invalid JSON: invalid UTF-8 in string") << bad;
}

TEST(JsonDocument, Surrogates) {
  EXPECT_EQ(parse(R"("\ud83d\ude00")").as_string(), "\xf0\x9f\x98\x80");
  EXPECT_EQ(parse(R"("\uD83D\uDE00x")").as_string(), "\xf0\x9f\x98\x80x");
  const std::string unpaired = "invalid JSON: unpaired UTF-16 surrogate in \\u escape";
  EXPECT_EQ(error_of(R"(["\ud800"])"), "t.json:1:4: " + unpaired);
  EXPECT_EQ(error_of(R"(["\ud800x"])"), "t.json:1:4: " + unpaired);
  EXPECT_EQ(error_of(R"(["\ude00"])"), "t.json:1:4: " + unpaired);
  EXPECT_EQ(error_of(R"(["\ud800\ud800"])"), "t.json:1:4: " + unpaired);
  EXPECT_EQ(error_of(R"(["\ude00\ud83d"])"), "t.json:1:4: " + unpaired);
  // Allowed on request (Python keeps them), in generalized UTF-8.
  JsonOptions options;
  options.allow_lone_surrogates = true;
  EXPECT_EQ(parse(R"("\ud800x")", options).as_string(), "\xed\xa0\x80x");
  EXPECT_EQ(parse(R"("\ud800\ud83d\ude00")", options).as_string(), "\xed\xa0\x80\xf0\x9f\x98\x80");
}

TEST(JsonDocument, DeepNestingIsBoundedNotACrash) {
  const auto nested = [](std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
  };
  EXPECT_NO_THROW(parse(nested(512)));
  EXPECT_EQ(error_of(nested(513)), "t.json:1:513: invalid JSON: nesting deeper than 512 levels");
  // Far deeper than any stack could recurse: refused at the limit, long before.
  EXPECT_EQ(error_of(std::string(10'000'000, '[')),
            "t.json:1:513: invalid JSON: nesting deeper than 512 levels");
  std::string objects;
  for (int i = 0; i < 600; ++i) objects += "{\"a\":";
  EXPECT_EQ(error_of(objects), "t.json:1:2561: invalid JSON: nesting deeper than 512 levels");
  JsonOptions options;
  options.max_depth = 2;
  EXPECT_NO_THROW(parse("[[1]]", options));
  EXPECT_EQ(error_of("[{\"a\": []}]", options),
            "t.json:1:8: invalid JSON: nesting deeper than 2 levels");
}

TEST(JsonDocument, StreamsTopLevelMembers) {
  std::vector<std::string> seen;
  const auto visit = [&](const JsonMember& member) {
    seen.push_back(base::cat(
        member.key, "@", member.line, ":", member.column, "=",
        member.value.is_object() ? member.value.find("k")->as_int64() : member.value.as_int64()));
  };
  const JsonValue root = parse_json("{\"a\": 1,\n \"b\": {\"k\": 2}}", "t.json", {}, visit);
  EXPECT_TRUE(root.is_object());
  EXPECT_TRUE(root.members().empty());
  EXPECT_EQ(seen, (std::vector<std::string>{"a@1:2=1", "b@2:2=2"}));
  // Duplicates are still refused (top level and nested), and syntax errors still located.
  const auto streamed_error = [&](std::string_view text) {
    try {
      parse_json(text, "t.json", {}, visit);
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(streamed_error(R"({"a": 1, "a": 2})"), "t.json:1:10: duplicate key 'a'");
  EXPECT_EQ(streamed_error(R"({"a": {"b": 1, "b": 2}})"), "t.json:1:16: duplicate key 'a.b'");
  EXPECT_EQ(streamed_error("{\"a\": 1 \"b\": 2}"), "t.json:1:9: invalid JSON: expected ',' or '}'");
  // Another top-level value comes back whole.
  seen.clear();
  EXPECT_EQ(parse_json("[{\"k\": 1}]", "t.json", {}, visit).items().size(), 1u);
  EXPECT_TRUE(seen.empty());
}

}  // namespace
}  // namespace mds::config
