// Kernels that can run in several launch shapes computing the same bits (variant 0 is the
// default) pick one by timing them all on their first call with a given problem
// (kernels/variant_trials.h, DeviceContext::time_kernel_shapes) and keep the pick here for every
// later call. A variant whose outputs differ from variant 0's in any byte is never picked, so a
// run's results do not depend on the timings. Plain C++ and header-only, so that the choice itself
// builds and is tested without CUDA and kernels/ uses it without linking ops/ code.
#pragma once
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace mds::ops {

// One variant's trial: its fastest time (ms a call) and whether its outputs were variant 0's bits.
struct VariantTrial {
  float ms = 0.0f;
  bool same_bits = true;
};

// The trials of `count` variants, the device's parts given as functions: `run(v)` queues variant
// v (its outputs the same however often it runs), `outputs()` waits for it and returns the bytes
// of its outputs, `time(v)` runs variant v once and returns its milliseconds. Every variant runs
// once to warm up and have its outputs compared with variant 0's; then `rounds` rounds time each
// variant once in turn (0, 1, …, count − 1), a variant's time being its fastest round.
std::vector<VariantTrial> run_trials(int count, int rounds, const std::function<void(int)>& run,
                                     const std::function<std::vector<std::string>()>& outputs,
                                     const std::function<float(int)>& time);

// The index of the fastest trial whose bits are variant 0's (variant 0 itself always qualifies,
// whatever its own flag says); ties go to the lower index. Fails on an empty list.
int fastest_same_bits(const std::vector<VariantTrial>& trials);

class LaunchVariantChoices {
 public:
  // One problem's pick, with what decided it (trials empty: not timed, the default taken for
  // `untimed_reason`).
  struct Pick {
    std::string key;
    std::vector<std::string> names;
    std::vector<VariantTrial> trials;
    int chosen = 0;
    std::string untimed_reason;
  };

  // The variant picked for the problem `key` describes, if one was.
  std::optional<int> find(const std::string& key) const;
  // Keeps the pick of `trials` (fastest_same_bits; one trial per name) for `key` and returns it.
  // Fails with one line when `key` was picked before or the counts differ.
  int record(const std::string& key, std::vector<std::string> names,
             std::vector<VariantTrial> trials);
  // Keeps variant 0 for `key` untimed, saying why (e.g. no memory for the trials).
  void record_default(const std::string& key, std::string reason);

  // In the order they were made.
  const std::vector<Pick>& picks() const { return picks_; }

 private:
  std::vector<Pick> picks_;
};

// One line for a log: "<key>: <chosen name> (<name> <ms> ms, …)", a variant whose bits differed
// marked "different bits", an untimed pick "default (<reason>)".
std::string describe(const LaunchVariantChoices::Pick& pick);

// Definitions (header-only, so that kernels/ uses them without linking ops/ code).

inline std::vector<VariantTrial> run_trials(
    int count, int rounds, const std::function<void(int)>& run,
    const std::function<std::vector<std::string>()>& outputs,
    const std::function<float(int)>& time) {
  if (count < 1 || rounds < 1) base::fail("run_trials: ", count, " variants, ", rounds, " rounds");
  std::vector<VariantTrial> trials(static_cast<std::size_t>(count));
  std::vector<std::string> reference;
  for (int v = 0; v < count; ++v) {
    run(v);
    std::vector<std::string> bytes = outputs();
    if (v == 0) {
      reference = std::move(bytes);
    } else {
      trials[static_cast<std::size_t>(v)].same_bits = bytes == reference;
    }
  }
  for (int round = 0; round < rounds; ++round) {
    for (int v = 0; v < count; ++v) {
      const float ms = time(v);
      VariantTrial& t = trials[static_cast<std::size_t>(v)];
      if (round == 0 || ms < t.ms) t.ms = ms;
    }
  }
  return trials;
}

inline int fastest_same_bits(const std::vector<VariantTrial>& trials) {
  if (trials.empty()) base::fail("fastest_same_bits: no trials");
  int best = 0;
  for (int i = 1; i < static_cast<int>(trials.size()); ++i) {
    const VariantTrial& t = trials[static_cast<std::size_t>(i)];
    if (t.same_bits && t.ms < trials[static_cast<std::size_t>(best)].ms) best = i;
  }
  return best;
}

inline std::optional<int> LaunchVariantChoices::find(const std::string& key) const {
  for (const Pick& pick : picks_) {
    if (pick.key == key) return pick.chosen;
  }
  return std::nullopt;
}

inline int LaunchVariantChoices::record(const std::string& key, std::vector<std::string> names,
                                        std::vector<VariantTrial> trials) {
  if (find(key)) base::fail("launch variants: ", key, " was picked before");
  if (names.size() != trials.size() || trials.empty()) {
    base::fail("launch variants: ", key, ": ", names.size(), " names for ", trials.size(),
               " trials");
  }
  const int chosen = fastest_same_bits(trials);
  picks_.push_back({key, std::move(names), std::move(trials), chosen, {}});
  return chosen;
}

inline void LaunchVariantChoices::record_default(const std::string& key, std::string reason) {
  if (find(key)) base::fail("launch variants: ", key, " was picked before");
  picks_.push_back({key, {}, {}, 0, std::move(reason)});
}

inline std::string describe(const LaunchVariantChoices::Pick& pick) {
  if (pick.trials.empty()) {
    return pick.key + ": default (" + pick.untimed_reason + ")";
  }
  std::string line = pick.key + ": " + pick.names[static_cast<std::size_t>(pick.chosen)] + " (";
  for (std::size_t i = 0; i < pick.trials.size(); ++i) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.4f", static_cast<double>(pick.trials[i].ms));
    if (i > 0) line += ", ";
    line += pick.names[i] + " " + ms + " ms";
    if (!pick.trials[i].same_bits && i > 0) line += " different bits";
  }
  return line + ")";
}

}  // namespace mds::ops
