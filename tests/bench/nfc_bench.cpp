// nfc_normalize throughput (MB of UTF-8 input per second, one thread, best of N runs) on the files
// given; run by tests/bench/nfc_bench.sh next to the tokenizers library's NFC.
// Usage: nfc_bench [--repeats N] FILE...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"
#include "base/program.h"
#include "text/unicode_nfc.h"

namespace {

double best_seconds(const std::string& text, int repeats, std::size_t& output_bytes) {
  double best = 1e30;
  for (int run = 0; run < repeats; ++run) {
    const auto start = std::chrono::steady_clock::now();
    output_bytes = mds::text::nfc_normalize(text).size();
    const auto stop = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(stop - start).count());
  }
  return best;
}

void run(int argc, char** argv) {
  int repeats = 10;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::stoi(argv[++i]);
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) mds::base::fail("usage: nfc_bench [--repeats N] FILE...");
  for (const std::string& file : files) {
    const std::string text = mds::base::read_file(file);
    std::size_t output_bytes = 0;
    const double seconds = best_seconds(text, repeats, output_bytes);
    std::printf("%s %zu %.6f %zu %d\n", file.c_str(), text.size(), seconds, output_bytes,
                mds::text::is_nfc_quick_yes(text) ? 1 : 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return mds::base::run_program("nfc_bench", [&] { run(argc, argv); });
}
