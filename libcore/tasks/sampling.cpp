#include "tasks/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "base/error.h"

namespace mds::tasks {

std::int64_t argmax(std::span<const float> values) {
  if (values.empty()) base::fail("argmax of no values");
  std::size_t best = 0;
  for (std::size_t i = 1; i < values.size(); ++i) {
    if (values[i] > values[best]) best = i;
  }
  return static_cast<std::int64_t>(best);
}

void filter_top_k_top_p(std::span<float> logits, std::int64_t top_k, double top_p) {
  constexpr float kRemoved = -std::numeric_limits<float>::infinity();
  const std::size_t n = logits.size();
  if (n == 0) return;
  if (top_k > 0 && static_cast<std::size_t>(top_k) < n) {
    std::vector<float> sorted(logits.begin(), logits.end());
    const auto kth = sorted.begin() + (top_k - 1);
    std::nth_element(sorted.begin(), kth, sorted.end(), std::greater<float>());
    const float threshold = *kth;
    for (float& logit : logits) {
      if (logit < threshold) logit = kRemoved;
    }
  }
  if (top_p > 0.0) {
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
    const double max = logits[order[0]];
    double total = 0.0;
    for (const float logit : logits) total += std::exp(static_cast<double>(logit) - max);
    // Sorted position i is removed when the mass before it already exceeds top_p (the marks of
    // cum > top_p shifted right by one); position 0 never is.
    double cumulative = 0.0;
    bool remove = false;
    for (std::size_t i = 0; i < n; ++i) {
      float& logit = logits[order[i]];
      const double p = std::exp(static_cast<double>(logit) - max) / total;
      if (remove) logit = kRemoved;
      cumulative += p;
      if (cumulative > top_p) remove = true;
    }
  }
}

TokenSampler::TokenSampler(std::uint64_t seed, std::uint64_t stream) {
  std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                         static_cast<std::uint32_t>(stream),
                         static_cast<std::uint32_t>(stream >> 32)};
  engine_.seed(sequence);
}

double TokenSampler::uniform() {
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

std::int64_t TokenSampler::next(std::span<float> logits, const SamplingOptions& options) {
  if (options.greedy) return argmax(logits);
  const float temperature = static_cast<float>(options.temperature);
  for (float& logit : logits) logit /= temperature;
  filter_top_k_top_p(logits, options.top_k, options.top_p);
  const double max = logits[static_cast<std::size_t>(argmax(logits))];
  std::vector<double> cumulative(logits.size());
  double total = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    total += std::exp(static_cast<double>(logits[i]) - max);
    cumulative[i] = total;
  }
  const double target = uniform() * total;
  const auto hit = std::upper_bound(cumulative.begin(), cumulative.end(), target);
  std::size_t index = static_cast<std::size_t>(hit - cumulative.begin());
  // Only rounding can leave the target at the very end; take the last token with mass then.
  if (index >= logits.size()) {
    index = logits.size() - 1;
    while (index > 0 && cumulative[index] == cumulative[index - 1]) --index;
  }
  return static_cast<std::int64_t>(index);
}

}  // namespace mds::tasks
