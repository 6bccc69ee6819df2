#include "base/error.h"

#include <cerrno>
#include <cstring>

namespace mds::base {

void fail_errno(const std::string& what) {
  const int code = errno;
  throw Error(what + ": " + std::strerror(code));
}

}  // namespace mds::base
