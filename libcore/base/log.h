#pragma once
#include <cstdio>
#include <string>

namespace mds::base {

// Messages of one program. Results and upstream-compatible lines go to stdout; notes and warnings
// go to stderr prefixed with the program name, so they stay visible when stdout is redirected.
class Log {
 public:
  explicit Log(std::string program, std::FILE* out = stdout, std::FILE* err = stderr)
      : program_(std::move(program)), out_(out), err_(err) {}

  // A line of regular output on stdout.
  void info(const std::string& line) const;
  // "<program>: note: ..." on stderr: something the user may want to know, nothing wrong.
  void note(const std::string& line) const;
  // "<program>: warning: ..." on stderr: something probably not what the user meant.
  void warn(const std::string& line) const;

 private:
  std::string program_;
  std::FILE* out_;
  std::FILE* err_;
};

}  // namespace mds::base
