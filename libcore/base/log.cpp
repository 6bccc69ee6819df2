#include "base/log.h"

namespace mds::base {

void Log::info(const std::string& line) const {
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void Log::note(const std::string& line) const {
  std::fflush(out_);
  std::fprintf(err_, "%s: note: %s\n", program_.c_str(), line.c_str());
}

void Log::warn(const std::string& line) const {
  std::fflush(out_);
  std::fprintf(err_, "%s: warning: %s\n", program_.c_str(), line.c_str());
}

}  // namespace mds::base
