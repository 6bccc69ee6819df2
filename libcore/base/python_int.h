// Python's int() on a decimal string, for flags upstream reads with int() after splitting them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace mds::base {

// Optional surrounding whitespace and sign, digits with single underscores between them; nullopt
// for anything else or a value outside int64.
std::optional<std::int64_t> python_int(const std::string& text);

}  // namespace mds::base
