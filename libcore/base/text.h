// Small text helpers shared by the readers of line-based files.
#pragma once
#include <string>
#include <string_view>

namespace mds::base {

// `text` without the spaces, tabs and line ends at either end.
std::string trimmed(std::string_view text);

}  // namespace mds::base
