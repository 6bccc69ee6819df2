// Test-only program for tests/e2e/unicode_nfc_oracle_test.py: NFC-normalizes strings so the test
// can compare them with the `tokenizers` library.
//   unicode_nfc_probe IN OUT
// IN holds records "<byte length>\n<UTF-8 bytes>" back to back (so any code point, newlines and
// NUL included, can be in a string); OUT gets for each one "<byte length> <quick>\n<bytes>" with
// the bytes of nfc_normalize and quick = 1 when is_nfc_quick_yes said the input is unchanged.
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/program.h"
#include "text/unicode_nfc.h"
#include "text/utf8.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) mds::base::fail("cannot open ", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The next record's string, advancing `pos` past it.
std::string_view next_record(std::string_view input, std::size_t& pos) {
  const std::size_t newline = input.find('\n', pos);
  if (newline == std::string_view::npos) mds::base::fail("record header without a newline");
  const std::size_t length = std::stoul(std::string(input.substr(pos, newline - pos)));
  if (length > input.size() - newline - 1) mds::base::fail("record longer than the input");
  pos = newline + 1 + length;
  return input.substr(newline + 1, length);
}

void run(int argc, char** argv) {
  if (argc != 3) mds::base::fail("usage: unicode_nfc_probe IN OUT");
  const std::string input = read_file(argv[1]);
  std::ofstream out(argv[2], std::ios::binary);
  for (std::size_t pos = 0; pos < input.size();) {
    const std::string_view text = next_record(input, pos);
    if (mds::text::find_invalid_utf8(text)) mds::base::fail("record is not valid UTF-8");
    const std::string normalized = mds::text::nfc_normalize(text);
    out << normalized.size() << ' ' << (mds::text::is_nfc_quick_yes(text) ? 1 : 0) << '\n'
        << normalized;
  }
  if (!out.good()) mds::base::fail("cannot write ", argv[2]);
}

}  // namespace

int main(int argc, char** argv) {
  return mds::base::run_program("unicode_nfc_probe", [&] { run(argc, argv); });
}
