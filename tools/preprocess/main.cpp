// preprocess: JSON lines -> Megatron .bin/.idx datasets (upstream tools/preprocess_data.py).
#include <chrono>
#include <cstdio>

#include "base/error.h"
#include "base/log.h"
#include "base/program.h"
#include "base/stop_signal.h"
#include "config/flags.h"
#include "config/tokenizer_args.h"
#include "data/preprocess.h"
#include "text/tokenizer_factory.h"

namespace {

using namespace mds;

struct Args {
  data::PreprocessOptions options;
  config::TokenizerArgs tokenizer;
  std::string dataset_impl = "mmap";
  bool keep_newlines = false;
};

void add_flags(config::FlagSet& flags, Args& args) {
  CLI::App& app = flags.app();
  data::PreprocessOptions& o = args.options;
  app.add_option("--input", o.inputs,
                 "JSON-lines files (plain, .zst, .xz or .gz, detected by content); - reads stdin")
      ->required()
      ->expected(1, CLI::detail::expected_max_vector_size);
  app.add_option("--json-keys", o.json_keys, "keys to extract; one dataset per key")
      ->capture_default_str()
      ->expected(1, CLI::detail::expected_max_vector_size);
  app.add_option("--output-prefix", o.output_prefix,
                 "writes <prefix>_<key>_document.bin/.idx (the directory must exist)")
      ->required();
  app.add_flag("--append-eod", o.append_eod, "append the end-of-document token to each document");
  app.add_option("--dataset-impl", args.dataset_impl,
                 "mmap (MMIDIDX), or cached/lazy (legacy TNTIDX, int32)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mmap", "cached", "lazy"}));
  app.add_option("--workers", o.workers, "tokenizer threads; output does not depend on it")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--log-interval", o.log_interval,
                 "progress line every this many input lines (at most one per second) when stderr "
                 "is not a terminal")
      ->capture_default_str();
  app.add_flag("--skip-invalid-lines", o.skip_invalid_lines,
               "leave out lines that are not valid UTF-8 / JSON, are blank or lack a key, and "
               "report how many (default: stop at the first one)");
  app.add_flag("--keep-newlines", args.keep_newlines,
               "upstream: keep newlines when splitting sentences; only meaningful with "
               "--split-sentences");
  config::add_tokenizer_flags(flags, args.tokenizer, "", config::VocabExtraIdsFlag::kAbsent);
  flags.add_rejected("--split-sentences",
                     "NLTK punkt sentence splitting is not supported (its output depends on the "
                     "NLTK version and model); preprocess whole documents",
                     false);
  flags.add_rejected("--datasets", "upstream parses but never uses it; give files with --input",
                     true);
}

void print_summary(const data::PreprocessResult& result, std::size_t workers) {
  const double seconds = result.seconds > 0 ? result.seconds : 1e-9;
  std::printf("Processed %llu lines (%.2f MB) in %.2f s: %.2f MB/s with %zu worker%s\n",
              static_cast<unsigned long long>(result.lines),
              static_cast<double>(result.input_bytes) / 1048576.0, result.seconds,
              static_cast<double>(result.input_bytes) / 1048576.0 / seconds, workers,
              workers == 1 ? "" : "s");
  if (result.skipped_lines > 0) {
    std::printf("Skipped %llu invalid lines; the first: %s\n",
                static_cast<unsigned long long>(result.skipped_lines),
                result.first_skipped->c_str());
  }
  for (const auto& output : result.outputs) {
    std::printf("Wrote %s.bin/.idx: %llu documents, %llu tokens (%s)\n", output.prefix.c_str(),
                static_cast<unsigned long long>(output.documents),
                static_cast<unsigned long long>(output.tokens),
                std::string(io::dtype_name(result.dtype)).c_str());
  }
}

void run(int argc, char** argv) {
  Args args;
  config::FlagSet flags("preprocess", "Tokenize JSON lines into Megatron .bin/.idx datasets");
  add_flags(flags, args);
  flags.allow_abbreviations(true);  // upstream's argparse parser allows them
  flags.parse(argc, argv);
  const base::Log log("preprocess");
  if (args.keep_newlines) {
    log.warn("--keep-newlines has no effect without --split-sentences (as upstream)");
  }
  args.options.dataset_impl = io::parse_dataset_impl(args.dataset_impl);
  base::install_stop_signal_handlers();

  const auto start = std::chrono::steady_clock::now();
  for (const std::string& input : args.options.inputs) std::printf("Opening %s\n", input.c_str());
  std::printf("> building %s tokenizer ...\n", args.tokenizer.tokenizer_type.c_str());
  const auto tokenizer = text::build_tokenizer(args.tokenizer);
  const std::int64_t padded = text::padded_vocab_size(tokenizer->vocab_size(), args.tokenizer, 1);
  std::printf(" > padded vocab (size: %lld) with %lld dummy tokens (new size: %lld)\n",
              static_cast<long long>(tokenizer->vocab_size()),
              static_cast<long long>(padded - tokenizer->vocab_size()),
              static_cast<long long>(padded));
  std::printf("Vocab size: %lld\n", static_cast<long long>(tokenizer->vocab_size()));
  std::printf("Output prefix: %s\n", args.options.output_prefix.c_str());
  std::printf("Time to startup: %.3f\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::fflush(stdout);

  const data::PreprocessResult result = data::preprocess(args.options, *tokenizer);
  print_summary(result, args.options.workers);
}

}  // namespace

int main(int argc, char** argv) {
  return mds::base::run_program("preprocess", [&] { run(argc, argv); });
}
