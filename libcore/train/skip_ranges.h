// --skip-train-iteration-range (BigScience's addition, training.md §5.7 step 1): iteration ranges
// whose data is passed over without training, e.g. the batches around a loss spike.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mds::train {

struct IterationRange {
  std::int64_t start = 0;
  std::int64_t end = 0;  // inclusive
  bool operator==(const IterationRange&) const = default;
};

// The flag's words ("101-200 251-300"), each START-END read with Python's int() as upstream's
// parser does, sorted and with overlapping ranges merged (1-5 2-6 → 1-6; touching ones stay
// apart, as upstream). One line naming the word for anything else, or an END below its START.
std::vector<IterationRange> parse_skip_train_iteration_ranges(std::span<const std::string> words);

// The ranges still ahead of a run. Built at the iteration a run starts from: ranges that end at
// or before it are behind it. (Upstream drops only those ending strictly before, so a range
// ending exactly at the resumed iteration stays at the head, never matches again and hides every
// later range.)
class SkipRanges {
 public:
  SkipRanges(std::vector<IterationRange> ranges, std::int64_t iteration);

  // The head range when the next iteration (iteration + 1) falls in it, removed from the
  // remaining ones; nullopt otherwise.
  std::optional<IterationRange> take(std::int64_t iteration);
  const std::deque<IterationRange>& remaining() const { return remaining_; }

 private:
  std::deque<IterationRange> remaining_;
};

}  // namespace mds::train
