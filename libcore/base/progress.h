#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace mds::base {

struct ProgressSnapshot {
  std::uint64_t items = 0;      // documents, lines, datasets ...
  std::uint64_t bytes = 0;      // payload bytes processed (for MB/s)
  std::uint64_t raw_bytes = 0;  // bytes of the input files consumed (for percent and ETA)
  std::optional<std::uint64_t> raw_total;
  double seconds = 0;
};

// "Processed 1200 documents (350.2 docs/s, 61.30 MB/s), 42.0% of input, ETA 0:00:13."
// The first part is the text of upstream's progress line, so log parsers keep working.
std::string format_progress(const ProgressSnapshot& snapshot, const std::string& unit);

// Progress of a long job on stderr: a line rewritten in place on a terminal, or a line every
// `log_interval` items (and at most one per `min_seconds`) when stderr is a file or a pipe.
class Progress {
 public:
  struct Options {
    std::string unit = "documents";
    std::optional<std::uint64_t> raw_total;
    std::uint64_t log_interval = 100;
    double min_seconds = 1.0;
  };

  explicit Progress(Options options, std::FILE* out = stderr);
  // Cumulative counts; cheap to call often.
  void update(std::uint64_t items, std::uint64_t bytes, std::uint64_t raw_bytes);
  // Ends a terminal line so later output starts on a fresh line.
  void finish();
  double elapsed_seconds() const;

 private:
  ProgressSnapshot snapshot(std::uint64_t items, std::uint64_t bytes,
                            std::uint64_t raw_bytes) const;
  Options options_;
  std::FILE* out_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
  std::uint64_t next_item_mark_;
  bool printed_on_terminal_ = false;
};

}  // namespace mds::base
