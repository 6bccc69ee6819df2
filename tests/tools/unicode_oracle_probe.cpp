// Test-only program for tests/e2e/unicode_tables_test.py: dumps what the C++ GPT-2 tokenizer does
// so the test can compare it with Python's `regex` package.
//   unicode_oracle_probe DIR VOCAB MERGES
// writes DIR/classes.bin (one CharClass byte per code point 0..0x10FFFF) and, for the UTF-8 text
// in DIR/pretok_in.txt, DIR/pretok_out.txt (pre-token byte lengths) and DIR/ids_out.txt (ids).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "base/program.h"
#include "text/gpt2_bpe.h"
#include "text/gpt2_pretokenizer.h"
#include "text/unicode_classes.h"

namespace {

void run(int argc, char** argv) {
  if (argc != 4) mds::base::fail("usage: unicode_oracle_probe DIR VOCAB MERGES");
  const std::string dir = argv[1];
  std::ofstream classes(dir + "/classes.bin", std::ios::binary);
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    classes.put(static_cast<char>(mds::text::char_class(cp)));
  }
  std::ifstream in(dir + "/pretok_in.txt", std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::ofstream pieces(dir + "/pretok_out.txt");
  mds::text::Gpt2PreTokenizer pretokenizer(text);
  std::string_view piece;
  while (pretokenizer.next(piece)) pieces << piece.size() << '\n';
  const mds::text::GPT2BPETokenizer tokenizer(argv[2], argv[3]);
  std::ofstream ids(dir + "/ids_out.txt");
  for (const std::int32_t id : tokenizer.encode(text)) ids << id << '\n';
  if (!classes.good() || !pieces.good() || !ids.good()) mds::base::fail("cannot write to ", dir);
}

}  // namespace

int main(int argc, char** argv) {
  return mds::base::run_program("unicode_oracle_probe", [&] { run(argc, argv); });
}
