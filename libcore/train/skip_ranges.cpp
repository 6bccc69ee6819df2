#include "train/skip_ranges.h"

#include <algorithm>

#include "base/error.h"
#include "base/python_int.h"

namespace mds::train {
namespace {

IterationRange parse_range(const std::string& word) {
  const std::size_t dash = word.find('-');
  const auto fail = [&](const char* why) {
    base::fail("--skip-train-iteration-range: '", word, "' ", why);
  };
  if (dash == std::string::npos || word.find('-', dash + 1) != std::string::npos) {
    fail("is not a range START-END (two numbers, e.g. 101-200)");
  }
  const std::optional<std::int64_t> start = base::python_int(word.substr(0, dash));
  const std::optional<std::int64_t> end = base::python_int(word.substr(dash + 1));
  if (!start || !end) fail("is not a range START-END (two numbers, e.g. 101-200)");
  if (*end < *start) fail("ends before it starts");
  return {*start, *end};
}

}  // namespace

std::vector<IterationRange> parse_skip_train_iteration_ranges(std::span<const std::string> words) {
  std::vector<IterationRange> ranges;
  for (const std::string& word : words) ranges.push_back(parse_range(word));
  std::sort(ranges.begin(), ranges.end(), [](const IterationRange& a, const IterationRange& b) {
    return a.start != b.start ? a.start < b.start : a.end < b.end;
  });
  std::vector<IterationRange> merged;
  for (const IterationRange& range : ranges) {
    if (!merged.empty() && merged.back().end >= range.start) {
      merged.back().end = std::max(merged.back().end, range.end);
    } else {
      merged.push_back(range);
    }
  }
  return merged;
}

SkipRanges::SkipRanges(std::vector<IterationRange> ranges, std::int64_t iteration) {
  for (const IterationRange& range : ranges) {
    if (range.end > iteration) remaining_.push_back(range);
  }
}

std::optional<IterationRange> SkipRanges::take(std::int64_t iteration) {
  if (remaining_.empty()) return std::nullopt;
  const IterationRange head = remaining_.front();
  if (head.start > iteration + 1 || iteration + 1 > head.end) return std::nullopt;
  remaining_.pop_front();
  return head;
}

}  // namespace mds::train
