#include "ops/launch_variants.h"

#include <cstdio>
#include <utility>

#include "base/error.h"

namespace mds::ops {

std::vector<VariantTrial> run_trials(int count, int rounds, const std::function<void(int)>& run,
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

int fastest_same_bits(const std::vector<VariantTrial>& trials) {
  if (trials.empty()) base::fail("fastest_same_bits: no trials");
  int best = 0;
  for (int i = 1; i < static_cast<int>(trials.size()); ++i) {
    const VariantTrial& t = trials[static_cast<std::size_t>(i)];
    if (t.same_bits && t.ms < trials[static_cast<std::size_t>(best)].ms) best = i;
  }
  return best;
}

std::optional<int> LaunchVariantChoices::find(const std::string& key) const {
  for (const Pick& pick : picks_) {
    if (pick.key == key) return pick.chosen;
  }
  return std::nullopt;
}

int LaunchVariantChoices::record(const std::string& key, std::vector<std::string> names,
                                 std::vector<VariantTrial> trials) {
  if (find(key)) base::fail("launch variants: ", key, " was picked before");
  if (names.size() != trials.size() || trials.empty()) {
    base::fail("launch variants: ", key, ": ", names.size(), " names for ", trials.size(),
               " trials");
  }
  const int chosen = fastest_same_bits(trials);
  picks_.push_back({key, std::move(names), std::move(trials), chosen});
  return chosen;
}

void LaunchVariantChoices::record_default(const std::string& key, std::string reason) {
  if (find(key)) base::fail("launch variants: ", key, " was picked before");
  picks_.push_back({key, {std::move(reason)}, {}, 0});
}

std::string describe(const LaunchVariantChoices::Pick& pick) {
  if (pick.trials.empty()) {
    return pick.key + ": default (" + (pick.names.empty() ? "" : pick.names.front()) + ")";
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
