// JSON text as Python's json.dumps writes it with default settings.
#pragma once
#include <string>
#include <string_view>

namespace mds::tasks {

// A JSON string literal with ensure_ascii: \" \\ \n \r \t \b \f, other characters outside
// U+0020–U+007E as \u00XX / \uXXXX (UTF-16 surrogate pairs above U+FFFF). Input is valid UTF-8.
std::string json_string(std::string_view utf8);
// A JSON number as json.dumps writes a float (repr); NaN and infinities become null, which
// strict JSON readers accept (Python would write NaN / Infinity).
std::string json_number(double value);

}  // namespace mds::tasks
