#include "base/progress.h"

#include <unistd.h>

#include <cinttypes>

namespace mds::base {
namespace {

std::string short_unit(const std::string& unit) {
  if (unit == "documents") return "docs";
  return unit;
}

std::string format_duration(double seconds) {
  const auto total = static_cast<std::uint64_t>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64, total / 3600,
                total / 60 % 60, total % 60);
  return text;
}

}  // namespace

std::string format_progress(const ProgressSnapshot& s, const std::string& unit) {
  const double seconds = s.seconds > 0 ? s.seconds : 1e-9;
  char text[256];
  int n =
      std::snprintf(text, sizeof text, "Processed %" PRIu64 " %s (%.1f %s/s, %.2f MB/s)", s.items,
                    unit.c_str(), static_cast<double>(s.items) / seconds, short_unit(unit).c_str(),
                    static_cast<double>(s.bytes) / seconds / 1048576.0);
  std::string line(text, static_cast<std::size_t>(n));
  if (s.raw_total && *s.raw_total > 0 && s.raw_bytes > 0) {
    const double fraction = static_cast<double>(s.raw_bytes) / static_cast<double>(*s.raw_total);
    const double remaining = seconds * (1.0 / fraction - 1.0);
    n = std::snprintf(text, sizeof text, ", %.1f%% of input, ETA %s", 100.0 * fraction,
                      format_duration(remaining > 0 ? remaining : 0).c_str());
    line.append(text, static_cast<std::size_t>(n));
  }
  return line + ".";
}

Progress::Progress(Options options, std::FILE* out)
    : options_(std::move(options)),
      out_(out),
      terminal_(::isatty(::fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_),
      next_item_mark_(options_.log_interval) {}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

ProgressSnapshot Progress::snapshot(std::uint64_t items, std::uint64_t bytes,
                                    std::uint64_t raw_bytes) const {
  return {items, bytes, raw_bytes, options_.raw_total, elapsed_seconds()};
}

void Progress::update(std::uint64_t items, std::uint64_t bytes, std::uint64_t raw_bytes) {
  if (!terminal_ && (options_.log_interval == 0 || items < next_item_mark_)) return;
  const auto now = std::chrono::steady_clock::now();
  const double since_last = std::chrono::duration<double>(now - last_print_).count();
  if (since_last < (terminal_ ? 0.2 : options_.min_seconds)) return;
  last_print_ = now;
  const std::string line = format_progress(snapshot(items, bytes, raw_bytes), options_.unit);
  if (terminal_) {
    std::fprintf(out_, "\r%s\033[K", line.c_str());
    printed_on_terminal_ = true;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
    next_item_mark_ = (items / options_.log_interval + 1) * options_.log_interval;
  }
  std::fflush(out_);
}

void Progress::finish() {
  if (printed_on_terminal_) {
    std::fprintf(out_, "\n");
    std::fflush(out_);
    printed_on_terminal_ = false;
  }
}

}  // namespace mds::base
