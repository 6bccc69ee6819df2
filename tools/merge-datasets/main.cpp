// merge-datasets: concatenates indexed datasets, byte-identical to upstream's
// tools/merge_preprocessed_data.py (data.md §3).
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/program.h"
#include "base/stop_signal.h"
#include "config/flags.h"
#include "io/merge_datasets.h"

namespace {

// Python's repr of a list of str, so the "Merging [...]" line reads as upstream's does.
std::string python_list_repr(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const std::string& item : items) {
    if (out.size() > 1) out += ", ";
    const bool double_quote =
        item.find('\'') != std::string::npos && item.find('"') == std::string::npos;
    const char quote = double_quote ? '"' : '\'';
    out += quote;
    for (const char c : item) {
      if (c == '\\' || c == quote) {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c == '\r') {
        out += "\\r";
      } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        char escaped[5];
        std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
        out += escaped;
      } else {
        out += c;
      }
    }
    out += quote;
  }
  return out + "]";
}

// Shortest round-trip digits, as Python prints a float.
std::string shortest(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

}  // namespace

int main(int argc, char** argv) {
  mds::config::FlagSet flags(
      "merge-datasets",
      "Concatenates indexed datasets (<prefix>.bin/.idx, mmap or legacy format) in the given "
      "order into <output-prefix>.bin/.idx, byte-identical to Megatron-DeepSpeed's "
      "tools/merge_preprocessed_data.py.");
  flags.allow_abbreviations(true);  // upstream's argparse parser keeps allow_abbrev=True
  std::vector<std::string> datasets;
  std::string output_prefix;
  std::string merge = "serial";
  std::optional<std::string> torch_backend;
  std::optional<int> local_rank;
  CLI::App& app = flags.app();
  app.add_option("--datasets", datasets,
                 "Paths to one or more input datasets to merge (prefixes without .bin/.idx)")
      ->required()
      ->expected(1, CLI::detail::expected_max_vector_size)
      ->group("input data");
  app.add_option("--output-prefix", output_prefix,
                 "Path to binary output file without suffix (writes exactly <prefix>.bin/.idx)")
      ->required()
      ->group("output data");
  app.add_option("--merge", merge,
                 "serial or distributed; both produce the same bytes, and this program always "
                 "merges in one process")
      ->check(CLI::IsMember({"serial", "distributed"}))
      ->capture_default_str()
      ->group("runtime");
  app.add_option("--torch-backend", torch_backend,
                 "gloo or mpi: accepted for compatibility, not used")
      ->check(CLI::IsMember({"gloo", "mpi"}))
      ->group("runtime");
  app.add_option("--local_rank", local_rank,
                 "Local rank from torch.distributed.launch: accepted for compatibility, not used")
      ->group("runtime");
  flags.parse(argc, argv);

  return mds::base::run_program("merge-datasets", [&] {
    // Ctrl-C, SLURM's SIGTERM, or a closed stdout pipe (merge-datasets ... | head) must not kill
    // the process between creating and renaming its temporaries: a stop request ends the merge
    // after the current input (temporaries removed), and output lines to a closed pipe are dropped.
    mds::base::install_stop_signal_handlers();
    std::signal(SIGPIPE, SIG_IGN);
    if (merge == "distributed") {
      std::printf(
          "Note: --merge distributed produces the same bytes as a serial merge; merge-datasets "
          "merges serially in this process\n");
    } else if (torch_backend) {
      std::printf("Ignoring setting for --torch-backend since using a serial merge\n");
    }
    if (local_rank)
      std::printf("Ignoring --local_rank %d (merge-datasets is one process)\n", *local_rank);

    const auto start = std::chrono::steady_clock::now();
    std::printf("Merging %s\n", python_list_repr(datasets).c_str());
    std::printf("Output prefix: %s\n", output_prefix.c_str());
    std::fflush(stdout);
    std::uint64_t previous = 0;
    const mds::io::MergeSummary summary = mds::io::merge_datasets(
        datasets, output_prefix, [&](std::size_t, const std::string& prefix, std::uint64_t total) {
          std::printf("    concat %s size=%llu for a total size of %llu\n", prefix.c_str(),
                      static_cast<unsigned long long>(total - previous),
                      static_cast<unsigned long long>(total));
          std::fflush(stdout);
          previous = total;
          mds::base::throw_if_stop_requested();
        });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("Time to merge: %s\n", shortest(seconds).c_str());
    std::printf("Merged %zu datasets to %s\n", datasets.size(), output_prefix.c_str());
    const double megabytes = static_cast<double>(summary.bin_bytes) / 1e6;
    std::printf("%llu documents, %llu sequences, %llu tokens, %llu bytes in %.3f s (%.1f MB/s)\n",
                static_cast<unsigned long long>(summary.documents),
                static_cast<unsigned long long>(summary.sequences),
                static_cast<unsigned long long>(summary.tokens),
                static_cast<unsigned long long>(summary.bin_bytes), seconds,
                seconds > 0 ? megabytes / seconds : 0.0);
  });
}
