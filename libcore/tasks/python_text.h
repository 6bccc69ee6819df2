// The few Python str operations the zero-shot tasks depend on, on UTF-8 text: str.isspace,
// str.strip(), str.split() and float formatting ('{:.4E}' and repr). Upstream's token counts and
// result lines come from these, so they follow Python's definitions rather than the C locale's.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mds::tasks {

// Python's str.isspace for one code point (also what `re`'s \s matches in a str pattern):
// U+0009–U+000D, U+001C–U+001F, U+0020, U+0085, U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000.
bool is_python_space(char32_t code_point);

// The code point starting at byte `pos` of valid UTF-8 text; `pos` moves past it.
char32_t next_code_point(std::string_view utf8, std::size_t& pos);
// The code point ending just before byte `end`; `end` moves to its first byte.
char32_t previous_code_point(std::string_view utf8, std::size_t& end);

// str.strip() with no argument: Python whitespace removed at both ends.
std::string_view python_strip(std::string_view utf8);
// str.split() with no argument: runs of Python whitespace separate words, none are empty.
std::vector<std::string_view> python_split(std::string_view utf8);
// Number of code points (Python's len of the decoded str).
std::size_t code_point_count(std::string_view utf8);

// Python's '{:.4E}'.format(x), e.g. "3.2188E+00" (also "inf", "nan" as Python writes them).
std::string format_e4(double value);
// Python's repr(float) is base::python_float_repr (base/python_float.h).

}  // namespace mds::tasks
