#include "test_support.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>

#include "base/error.h"

namespace mds::testing_support {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw std::runtime_error("cannot read " + path);
  return bytes;
}

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (const char c : bytes) {
    out += kDigits[static_cast<unsigned char>(c) >> 4];
    out += kDigits[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  throw std::invalid_argument("unhex: not a hex digit: '" + std::string(1, c) + "'");
}

// `text` with every character that is not safe in a file name replaced by '_'
// (parameterised tests have '/' in their names).
std::string file_name_safe(std::string text) {
  for (char& c : text) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-' || c == '.';
    if (!safe) c = '_';
  }
  return text;
}

}  // namespace

std::string unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) throw std::invalid_argument("unhex: odd number of digits");
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    bytes += static_cast<char>(hex_digit(hex[i]) << 4 | hex_digit(hex[i + 1]));
  }
  return bytes;
}

ScratchDir::ScratchDir() {
  const auto* unit_test = ::testing::UnitTest::GetInstance();
  std::string name = "mds_";
  if (const auto* test = unit_test->current_test_info()) {
    name.append(test->test_suite_name()).append("_").append(test->name()).append("_");
  } else if (const auto* suite = unit_test->current_test_suite()) {
    name.append(suite->name()).append("_");
  }
  name.append(std::to_string(::getpid()));
  path_ = fs::path(::testing::TempDir()) / file_name_safe(std::move(name));
  fs::remove_all(path_);
  fs::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string ScratchDir::file(std::string_view name) const {
  return (path_ / name).string();
}

std::vector<std::string> ScratchDir::files() const {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(path_)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string one_line_error(const std::function<void()>& call) {
  try {
    call();
  } catch (const base::Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace mds::testing_support
