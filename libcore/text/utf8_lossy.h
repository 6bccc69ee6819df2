#pragma once
#include <string>
#include <string_view>

namespace mds::text {

// Decodes bytes as UTF-8 the way CPython's bytes.decode('utf-8', errors='replace') does: each
// maximal invalid subsequence (the longest prefix of a would-be valid sequence, or one byte)
// becomes one U+FFFD. E.g. E6 97 followed by nothing or by ASCII gives a single U+FFFD.
std::string decode_utf8_replace(std::string_view bytes);

}  // namespace mds::text
