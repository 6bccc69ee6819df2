#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace mds::base {

// An error the user can act on. Its message names the file, line or field at fault; programs print
// it as one line and exit non-zero.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  throw Error(cat(parts...));
}

// Throws Error("<what>: <strerror(errno)>"), reading errno at the call.
[[noreturn]] void fail_errno(const std::string& what);

// Runs `body`; an Error from it is prefixed with `path` ("<path>: <message>") unless its message
// already starts with it, so a file is named once however deep the failure.
template <typename Body>
void within_file(const std::string& path, Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(path, 0) == 0) throw;
    fail(path, ": ", what);
  }
}

}  // namespace mds::base
