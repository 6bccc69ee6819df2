#include "base/program.h"

#include <cstdio>
#include <exception>
#include <new>

#include "base/error.h"

namespace mds::base {

int run_program(const std::string& program, const std::function<void()>& body) {
  try {
    body();
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of memory\n", program.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: internal error: %s\n", program.c_str(), e.what());
  }
  return 1;
}

}  // namespace mds::base
