#pragma once
#include <functional>
#include <string>

namespace mds::base {

// Runs a program's body and turns any error into one "<program>: error: <message>" line on stderr
// and exit status 1. Returns the process exit status.
int run_program(const std::string& program, const std::function<void()>& body);

}  // namespace mds::base
