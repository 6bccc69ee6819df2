#include "io/json_fields.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mds::io {
namespace {

using namespace std::string_literals;

struct Accepted {
  std::string json;
  std::string text;
};

// Each document json.loads accepts, with the value of "text" that upstream tokenizes.
const std::vector<Accepted> kAccepted = {
    {R"({"text": "a"})", "a"},
    {R"({"text":"a"})", "a"},
    {" \t\r\n{ \"text\" \n: \r\"a\" \t} \r\n ", "a"},
    {R"({"id": 1, "text": "x", "z": null})", "x"},
    {R"({"text": ""})", ""},
    // Duplicate keys: the last one wins, also over a value of the wrong type.
    {R"({"text": "x", "text": "y"})", "y"},
    {R"({"text": 1, "text": "y"})", "y"},
    {R"({"text": {"text": 5}, "text": "y"})", "y"},
    // Keys compare after unescaping.
    {R"({"t\u0065xt": "v"})", "v"},
    {R"({"te\u0078t": "v", "text": "w"})", "w"},
    {R"({"\u0074ext": "v", "text\u0000": "w"})", "v"},
    // Escapes.
    {R"({"text": "\"\\\/\b\f\n\r\t"})", "\"\\/\b\f\n\r\t"},
    {R"({"text": "\u0041\u00e9\u65E5\u0000z"})", "A\xc3\xa9\xe6\x97\xa5\0z"s},
    {R"({"text": "\ud83d\ude00 \uD83D\uDE00"})", "\xf0\x9f\x98\x80 \xf0\x9f\x98\x80"},
    {R"({"text": "\udbff\udfff"})", "\xf4\x8f\xbf\xbf"},
    // Raw UTF-8, DEL and the separators Python's str.splitlines() would split on.
    {"{\"text\": \"caf\xc3\xa9 \x7f \xe2\x80\xa8 \xc2\x85 \xef\xbb\xbf\"}",
     "caf\xc3\xa9 \x7f \xe2\x80\xa8 \xc2\x85 \xef\xbb\xbf"},
    {R"({"text": "a", "n": [0, -0, 1, -12, 0.5, -0.0e0, 1e5, 1E+5, 1e-05, 123.456E789]})", "a"},
    {R"({"text": "a", "n": [NaN, Infinity, -Infinity, true, false, null]})", "a"},
    {R"({"text": "a", "n": [], "o": {}, "d": [{"x": [{}, [[]], {"y": "z"}]}], "e": { }})", "a"},
    {R"({"text": "a", "n": [ 1 , 2 ] , "o" : { "k" : "v" , "l" : [ ] } })", "a"},
    // Lone surrogates outside the requested field are parsed and ignored, as by upstream.
    {R"({"text": "a", "other": "\ud800", "\udc00": 1})", "a"},
    // A high surrogate whose follower is no low surrogate stays alone; both are read.
    {R"({"text": "a", "o": "\ud800\u0041\ud800\ud800\udc00"})", "a"},
    // Integers up to Python's 4300-digit limit, and floats of any length.
    {"{\"text\": \"a\", \"n\": " + std::string(4300, '7') + "}", "a"},
    {"{\"text\": \"a\", \"n\": -" + std::string(4300, '7') + "}", "a"},
    {"{\"text\": \"a\", \"n\": " + std::string(5000, '7') + ".5}", "a"},
    {"{\"text\": \"a\", \"n\": " + std::string(5000, '7') + "e1}", "a"},
    {"{\"text\": \"" + std::string(100000, 'x') + "\"}", std::string(100000, 'x')},
};

struct Rejected {
  std::string json;
  std::string reason;  // exact, or a prefix when it ends in '*'
};

const std::vector<Rejected> kRejected = {
    {"", "invalid JSON: expecting value at byte 0"},
    {"   ", "invalid JSON: expecting value at byte 3"},
    {"\xef\xbb\xbf{\"text\": \"a\"}", "invalid JSON: unexpected UTF-8 BOM at byte 0"},
    {" \xef\xbb\xbf{\"text\": \"a\"}", "invalid JSON: expecting value at byte 1"},
    // Valid JSON that is no object: upstream's obj[key] fails.
    {R"(["text"])", "not a JSON object but an array"},
    {R"("text")", "not a JSON object but a string"},
    {"42", "not a JSON object but a number"},
    {"-Infinity", "not a JSON object but a number"},
    {"null", "not a JSON object but null"},
    {"true", "not a JSON object but a boolean"},
    {"[1,]", "invalid JSON: expecting value at byte 3"},
    // The requested value.
    {R"({"other": "a"})", "no key 'text'"},
    {R"({"Text": "a"})", "no key 'text'"},
    {R"({})", "no key 'text'"},
    {R"({"text": 1})", "key 'text' is a number, not a string"},
    {R"({"text": NaN})", "key 'text' is a number, not a string"},
    {R"({"text": -Infinity})", "key 'text' is a number, not a string"},
    {R"({"text": null})", "key 'text' is null, not a string"},
    {R"({"text": false})", "key 'text' is a boolean, not a string"},
    {R"({"text": ["a"]})", "key 'text' is an array, not a string"},
    {R"({"text": {"a": "b"}})", "key 'text' is an object, not a string"},
    {R"({"text": "y", "text": 1})", "key 'text' is a number, not a string"},
    {R"({"text": "\ud800"})",
     "key 'text' has a lone surrogate \\ud800 that cannot be encoded as UTF-8"},
    {R"({"text": "ok \udfff"})",
     "key 'text' has a lone surrogate \\udfff that cannot be encoded as UTF-8"},
    {R"({"text": "\ud800\u0041"})", "key 'text' has a lone surrogate \\ud800*"},
    {R"({"text": "\ud83d\ude00\ud83d"})", "key 'text' has a lone surrogate \\ud83d*"},
    {R"({"text": "\ude00\ud83d"})", "key 'text' has a lone surrogate \\ude00*"},
    {R"({"text": "\ud800x"})", "key 'text' has a lone surrogate*"},
    // Objects.
    {R"({"text": "a",})",
     "invalid JSON: expecting property name enclosed in double quotes at byte 13"},
    {R"({"text": "a" "b": 1})", "invalid JSON: expecting ',' delimiter at byte 13"},
    {R"({"text" "a"})", "invalid JSON: expecting ':' delimiter at byte 8"},
    {R"({'text': 'a'})",
     "invalid JSON: expecting property name enclosed in double quotes at byte 1"},
    {R"({"text": 'a'})", "invalid JSON: expecting value at byte 9"},
    {R"({text: "a"})", "invalid JSON: expecting property name*"},
    {R"({,})", "invalid JSON: expecting property name*"},
    {R"({"text": "a")", "invalid JSON: expecting ',' delimiter at byte 12"},
    {R"({"text": "a"} x)", "invalid JSON: extra data at byte 14"},
    {R"({"text": "a"}{})", "invalid JSON: extra data at byte 13"},
    {R"({"text": "a"}])", "invalid JSON: extra data at byte 13"},
    {R"({"text": "a", "o": {"x" 1}})", "invalid JSON: expecting ':' delimiter at byte 24"},
    {R"({"text": "a", "o": {"x": 1,}})", "invalid JSON: expecting property name*"},
    {R"({"text": "a", "o": {1: 2}})", "invalid JSON: expecting property name*"},
    {R"({"text": "a", "o": [1 2]})", "invalid JSON: expecting ',' delimiter at byte 22"},
    {R"({"text": "a", "o": [1,]})", "invalid JSON: expecting value at byte 22"},
    {R"({"text": "a", "o": [,1]})", "invalid JSON: expecting value at byte 20"},
    {R"({"text": "a", "o": [})", "invalid JSON: expecting value at byte 20"},
    {R"({"text": "a", "o": [)", "invalid JSON: expecting value at byte 20"},
    {R"({"text": "a", "o": {"k": "v"})", "invalid JSON: expecting ',' delimiter at byte 29"},
    // Whitespace is only space, tab, CR and LF.
    {"{\"text\":\x0c\"a\"}", "invalid JSON: expecting value at byte 8"},
    {"{\"text\":\x0b\"a\"}", "invalid JSON: expecting value at byte 8"},
    {"{\xc2\xa0\"text\": \"a\"}", "invalid JSON: expecting property name*"},
    {"{\"text\": \"a\"}\xe3\x80\x80", "invalid JSON: extra data at byte 13"},
    {"{\"text\": \"a\"}\0"s, "invalid JSON: extra data at byte 13"},
    // Strings.
    {"{\"text\": \"a\tb\"}", "invalid JSON: invalid control character at byte 11"},
    {"{\"text\": \"a\x01\"}", "invalid JSON: invalid control character at byte 11"},
    {"{\"text\": \"a\0\"}"s, "invalid JSON: invalid control character at byte 11"},
    {"{\"text\": \"a\nb\"}", "invalid JSON: invalid control character at byte 11"},
    {"{\"o\": \"\x1f\", \"text\": \"a\"}", "invalid JSON: invalid control character at byte 7"},
    {"{\"te\x1fxt\": \"a\"}", "invalid JSON: invalid control character at byte 4"},
    {R"({"text": "\x"})", "invalid JSON: invalid \\escape at byte 10"},
    {R"({"text": "\'"})", "invalid JSON: invalid \\escape at byte 10"},
    {R"({"text": "\U0041"})", "invalid JSON: invalid \\escape at byte 10"},
    {R"({"text": "\u12"})", "invalid JSON: invalid \\uXXXX escape at byte 10"},
    {R"({"text": "\u12G4"})", "invalid JSON: invalid \\uXXXX escape at byte 10"},
    {R"({"text": "\u-123"})", "invalid JSON: invalid \\uXXXX escape at byte 10"},
    {R"({"text": "\ud800\uZZZZ"})", "invalid JSON: invalid \\uXXXX escape at byte 16"},
    {R"({"o": "\ud800\udc0"})", "invalid JSON: invalid \\uXXXX escape*"},
    {R"({"text": "abc)", "invalid JSON: unterminated string starting at byte 9"},
    {R"({"text": "abc\)", "invalid JSON: unterminated string starting at byte 9"},
    {R"({"text)", "invalid JSON: unterminated string starting at byte 1"},
    {R"({"te\"xt)", "invalid JSON: unterminated string starting at byte 1"},
    // Numbers and literals, in a field that is not requested.
    {R"({"text": "a", "n": 01})", "invalid JSON: expecting ',' delimiter at byte 20"},
    {R"({"text": "a", "n": 1.})", "invalid JSON: expecting ',' delimiter at byte 20"},
    {R"({"text": "a", "n": .5})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": 1e})", "invalid JSON: expecting ',' delimiter at byte 20"},
    {R"({"text": "a", "n": 1e+})", "invalid JSON: expecting ',' delimiter at byte 20"},
    {R"({"text": "a", "n": 1.5E-})", "invalid JSON: expecting ',' delimiter at byte 22"},
    {R"({"text": "a", "n": +1})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": -})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": --1})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": -01})", "invalid JSON: expecting ',' delimiter at byte 21"},
    {R"({"text": "a", "n": 0x10})", "invalid JSON: expecting ',' delimiter at byte 20"},
    {R"({"text": "a", "n": 1_000})", "invalid JSON: expecting ',' delimiter at byte 20"},
    {R"({"text": "a", "n": nul})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": True})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": nan})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": NaNa})", "invalid JSON: expecting ',' delimiter at byte 22"},
    {R"({"text": "a", "n": infinity})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": -Inf})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": -NaN})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": +Infinity})", "invalid JSON: expecting value at byte 19"},
    {R"({"text": "a", "n": undefined})", "invalid JSON: expecting value at byte 19"},
    {"{\"text\": \"a\", \"n\": " + std::string(4301, '7') + "}",
     "invalid JSON: integer with more than 4300 digits*"},
    {"[-" + std::string(4301, '1') + "]", "invalid JSON: integer with more than 4300 digits*"},
};

// Matches a reason against an expectation that may end in '*' (prefix match).
bool reason_matches(const std::string& reason, const std::string& expected) {
  if (!expected.empty() && expected.back() == '*') {
    return reason.compare(0, expected.size() - 1, expected, 0, expected.size() - 1) == 0;
  }
  return reason == expected;
}

TEST(Json, AcceptsWhatPythonAccepts) {
  JsonFieldExtractor extractor({"text"});
  std::vector<std::string> values;
  for (const Accepted& item : kAccepted) {
    const auto error = extractor.extract(item.json, values);
    ASSERT_EQ(error, std::nullopt) << item.json.substr(0, 200);
    ASSERT_EQ(values.size(), 1u);
    EXPECT_EQ(values[0], item.text) << item.json.substr(0, 200);
  }
}

TEST(Json, RejectsWhatPythonOrUpstreamRejects) {
  JsonFieldExtractor extractor({"text"});
  std::vector<std::string> values;
  for (const Rejected& item : kRejected) {
    const auto error = extractor.extract(item.json, values);
    ASSERT_NE(error, std::nullopt) << item.json.substr(0, 200);
    EXPECT_TRUE(reason_matches(*error, item.reason))
        << item.json.substr(0, 200) << "\n  got:      " << *error
        << "\n  expected: " << item.reason;
    EXPECT_EQ(error->find('\n'), std::string::npos);
  }
}

TEST(Json, SeveralKeysInRequestOrder) {
  JsonFieldExtractor extractor({"text", "meta", "text"});
  std::vector<std::string> values;
  ASSERT_EQ(extractor.extract(R"({"meta": "m", "x": [1], "text": "t"})", values), std::nullopt);
  EXPECT_EQ(values, (std::vector<std::string>{"t", "m", "t"}));
  EXPECT_EQ(extractor.extract(R"({"text": "t"})", values), "no key 'meta'");
  EXPECT_EQ(extractor.extract(R"({"meta": 3})", values), "no key 'text'");
}

TEST(Json, KeysWithEscapesAndNonAscii) {
  JsonFieldExtractor extractor({"a\"b", "\xc3\xa9t\xc3\xa9"});
  std::vector<std::string> values;
  ASSERT_EQ(extractor.extract(R"({"a\"b": "1", "\u00e9t\u00E9": "2"})", values), std::nullopt);
  EXPECT_EQ(values, (std::vector<std::string>{"1", "2"}));
  ASSERT_EQ(extractor.extract("{\"a\\u0022b\": \"3\", \"\xc3\xa9t\xc3\xa9\": \"4\"}", values),
            std::nullopt);
  EXPECT_EQ(values, (std::vector<std::string>{"3", "4"}));
  // No Unicode normalisation: e + combining acute is another key.
  EXPECT_EQ(extractor.extract(R"({"a\"b": "1", "e\u0301te\u0301": "2"})", values),
            "no key '\xc3\xa9t\xc3\xa9'");
}

TEST(Json, NoKeysOnlyValidates) {
  JsonFieldExtractor extractor({});
  std::vector<std::string> values{"stale"};
  EXPECT_EQ(extractor.extract(R"({"a": [1, {"b": null}]})", values), std::nullopt);
  EXPECT_TRUE(values.empty());
  EXPECT_NE(extractor.extract(R"({"a": [1, {"b": nul}]})", values), std::nullopt);
}

TEST(Json, ReusesValuesBetweenDocuments) {
  JsonFieldExtractor extractor({"text"});
  std::vector<std::string> values;
  ASSERT_EQ(extractor.extract(R"({"text": "a much longer first value"})", values), std::nullopt);
  ASSERT_EQ(extractor.extract(R"({"text": "b"})", values), std::nullopt);
  EXPECT_EQ(values[0], "b");
  EXPECT_NE(extractor.extract(R"({"text": "c"} x)", values), std::nullopt);
  ASSERT_EQ(extractor.extract(R"({"text": "d"})", values), std::nullopt);
  EXPECT_EQ(values[0], "d");
}

std::string nested(std::size_t depth, bool objects) {
  std::string json = R"({"text": "a", "n": )";
  for (std::size_t i = 1; i < depth; ++i) json += objects ? "{\"k\": " : "[";
  json += "0";
  for (std::size_t i = 1; i < depth; ++i) json += objects ? "}" : "]";
  return json + "}";
}

TEST(Json, NestingLimitMatchesUpstreamRecursionError) {
  JsonFieldExtractor extractor({"text"});
  std::vector<std::string> values;
  const std::size_t limit = JsonFieldExtractor::kMaxDepth;
  for (const bool objects : {false, true}) {
    EXPECT_EQ(extractor.extract(nested(limit, objects), values), std::nullopt);
    const auto error = extractor.extract(nested(limit + 1, objects), values);
    ASSERT_NE(error, std::nullopt);
    EXPECT_NE(error->find("nested too deeply"), std::string::npos) << *error;
  }
  EXPECT_EQ(extractor.extract(std::string(limit, '[') + std::string(limit, ']'), values),
            "not a JSON object but an array");
  // Far deeper than any call stack would survive with a recursive parser.
  const std::string deep(1 << 22, '[');
  EXPECT_NE(extractor.extract(deep, values), std::nullopt);
  EXPECT_NE(extractor.extract("{\"a\":" + deep, values), std::nullopt);
}

TEST(Json, NeverReadsOutsideTheDocument) {
  // Every prefix of a document rich in escapes ends somewhere in the middle of a token; a sanitizer
  // build flags any read past the end.
  const std::string json =
      R"({"text": "x\u00e9\ud83d\ude00\n", "n": [-1.5e+3, NaN, -Infinity, true, null, {"k": false}]})";
  JsonFieldExtractor extractor({"text"});
  std::vector<std::string> values;
  for (std::size_t size = 0; size < json.size(); ++size) {
    const std::string prefix = json.substr(0, size);
    EXPECT_NE(extractor.extract(prefix, values), std::nullopt) << prefix;
  }
  EXPECT_EQ(extractor.extract(json, values), std::nullopt);
}

}  // namespace
}  // namespace mds::io
