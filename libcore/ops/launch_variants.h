// Kernels that can run in several launch shapes computing the same bits (variant 0 is the
// default) pick one by timing them all on their first call with a given problem
// (kernels/variant_trials.h, DeviceContext::time_kernel_shapes) and keep the pick here for every
// later call. A variant whose outputs differ from variant 0's in any byte is never picked, so a
// run's results do not depend on the timings. Plain C++, so that the choice itself builds and is
// tested without CUDA.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

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
  // One problem's pick, with what decided it (trials empty: not timed, the default taken).
  struct Pick {
    std::string key;
    std::vector<std::string> names;
    std::vector<VariantTrial> trials;
    int chosen = 0;
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

}  // namespace mds::ops
