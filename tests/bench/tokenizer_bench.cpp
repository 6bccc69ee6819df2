// Single-thread GPT-2 tokenizer throughput (MB/s of UTF-8 input) on real corpora.
//
// For each corpus file: "cold" encodes the file once per pass with a fresh Encoder (empty
// pre-token cache, so every distinct word goes through BPE), "warm" encodes it repeatedly with one
// Encoder (after the first pass nearly every pre-token is a cache hit). Each mode processes about
// --megabytes of text in 10 rounds and reports the best round, which is robust to other load on
// the machine. Token counts are printed so tests/bench/tokenizer_baseline.py (tiktoken) can be
// checked against the same files.
//
// Usage: tokenizer_bench [--vocab FILE] [--merges FILE] [--megabytes N] [CORPUS...]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"
#include "config/flags.h"
#include "text/gpt2_bpe.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Result {
  double mb_per_s;
  std::size_t tokens;  // of one pass
};

constexpr int kRounds = 10;

// Best MB/s over kRounds rounds of `passes` encodes each.
Result run(const mds::text::GPT2BPETokenizer& tokenizer, const std::string& text, int passes,
           bool fresh_encoder_each_pass) {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size());
  auto encoder = tokenizer.make_encoder();
  encoder->encode(text, ids);  // warms the cache for the warm mode
  Result best{0, ids.size()};
  for (int round = 0; round < kRounds; ++round) {
    const auto start = Clock::now();
    for (int pass = 0; pass < passes; ++pass) {
      if (fresh_encoder_each_pass) encoder = tokenizer.make_encoder();
      ids.clear();
      encoder->encode(text, ids);
    }
    const double elapsed = seconds_since(start);
    best.mb_per_s =
        std::max(best.mb_per_s, static_cast<double>(text.size()) * passes / 1e6 / elapsed);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string vocab = MDS_DATA_DIR "/gpt2/vocab.json";
  std::string merges = MDS_DATA_DIR "/gpt2/merges.txt";
  double megabytes = 50;
  std::vector<std::string> corpora;
  mds::config::FlagSet flags("tokenizer_bench",
                             "GPT-2 BPE tokenizer throughput (MB/s) on text corpora.");
  CLI::App& app = flags.app();
  app.add_option("--vocab", vocab, "GPT-2 vocab.json")->check(CLI::ExistingFile);
  app.add_option("--merges", merges, "GPT-2 merges.txt")->check(CLI::ExistingFile);
  app.add_option("--megabytes", megabytes, "text tokenized per corpus (repeated to reach it)")
      ->check(CLI::PositiveNumber);
  app.add_option("corpora", corpora, "text files (default: the bundled corpora)")
      ->check(CLI::ExistingFile);
  flags.parse(argc, argv);
  if (corpora.empty()) {
    corpora = {MDS_DATA_DIR "/corpora/tinyshakespeare.txt",
               MDS_DATA_DIR "/eval/wikitext-2-test.txt", MDS_DATA_DIR "/eval/wikitext-2-valid.txt"};
  }
  try {
    const auto load_start = Clock::now();
    const mds::text::GPT2BPETokenizer tokenizer(vocab, merges);
    std::printf("load vocab+merges: %.1f ms\n", seconds_since(load_start) * 1e3);
    std::printf("%-28s %9s %9s %11s %11s\n", "corpus", "MB", "tokens", "cold MB/s", "warm MB/s");
    for (const std::string& path : corpora) {
      const mds::base::MappedFile file(path);
      const std::string text(file.bytes());
      if (text.empty()) continue;
      const int passes = std::max(
          1, static_cast<int>(megabytes * 1e6 / kRounds / static_cast<double>(text.size())));
      const Result cold = run(tokenizer, text, passes, true);
      const Result warm = run(tokenizer, text, passes, false);
      const std::string name = path.substr(path.find_last_of('/') + 1);
      std::printf("%-28s %9.2f %9zu %11.1f %11.1f\n", name.c_str(),
                  static_cast<double>(text.size()) / 1e6, cold.tokens, cold.mb_per_s,
                  warm.mb_per_s);
    }
  } catch (const mds::base::Error& error) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", error.what());
    return 1;
  }
  return 0;
}
