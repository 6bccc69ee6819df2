// Helpers shared by the unit tests: whole-file I/O, hex dumps of byte strings and a scratch folder
// per test.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mds::testing_support {

// The bytes of the file at `path`; throws std::runtime_error if it cannot be read.
std::string read_file(const std::string& path);

// Replaces the file at `path` with `bytes`; throws std::runtime_error if it cannot be written.
void write_file(const std::string& path, std::string_view bytes);

// Lower-case hex, two digits a byte.
std::string hex(std::string_view bytes);

// The bytes that `hex` spells; throws std::invalid_argument on an odd length or a non-hex digit.
std::string unhex(std::string_view hex);

// An argv for programs' parsers built from strings (which it owns).
struct Argv {
  explicit Argv(std::vector<std::string> args) : storage(std::move(args)) {
    for (std::string& arg : storage) pointers.push_back(arg.data());
  }
  int argc() { return static_cast<int>(pointers.size()); }
  char** argv() { return pointers.data(); }
  std::vector<std::string> storage;
  std::vector<char*> pointers;
};

// A fresh, empty folder under testing::TempDir() named after the running test suite and test (and
// the process, so that concurrent runs do not meet), removed with everything in it on destruction.
// Made outside a test (in SetUpTestSuite) it is named after the suite alone.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The path of `name` inside the folder.
  std::string file(std::string_view name) const;
  // The names of the entries in the folder, sorted.
  std::vector<std::string> files() const;

 private:
  std::filesystem::path path_;
};

// The message of the base::Error `call` throws, which must be one line; "" and a test failure when
// it throws none.
std::string one_line_error(const std::function<void()>& call);

}  // namespace mds::testing_support
