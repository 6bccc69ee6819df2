// Choosing the next token from logits: greedy argmax, temperature, upstream's top-k / top-p
// filter (megatron/text_generation_utils.py top_k_logits, data.md §7.3) and seeded sampling.
#pragma once
#include <cstdint>
#include <random>
#include <span>

namespace mds::tasks {

// First index of the largest value (torch.argmax's choice among ties).
std::int64_t argmax(std::span<const float> values);

// top_k_logits in place: with top_k > 0 every logit below the k-th largest becomes −inf (ties
// with it stay, so more than k may remain; k beyond the size keeps all); then with top_p > 0
// the logits sorted descending (ties by index) keep the shortest prefix whose softmax mass
// exceeds top_p — the first token crossing the threshold is kept, as is always the largest.
void filter_top_k_top_p(std::span<float> logits, std::int64_t top_k, double top_p);

struct SamplingOptions {
  bool greedy = false;
  double temperature = 1.0;
  std::int64_t top_k = 0;
  double top_p = 0.0;
};

// A reproducible sampler: one Mersenne Twister stream per (seed, stream), so that a sample does
// not depend on which other samples share its batch.
class TokenSampler {
 public:
  TokenSampler(std::uint64_t seed, std::uint64_t stream);
  // A uniform double in [0, 1) from 53 random bits.
  double uniform();
  // Greedy argmax, or logits / temperature → filter → softmax → one draw. `logits` is scratch
  // (it is modified).
  std::int64_t next(std::span<float> logits, const SamplingOptions& options);

 private:
  std::mt19937_64 engine_;
};

}  // namespace mds::tasks
