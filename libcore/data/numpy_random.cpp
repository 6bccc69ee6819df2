#include "data/numpy_random.h"

namespace mds::data {

std::uint64_t RandomState::random_interval(std::uint64_t max) {
  if (max == 0) return 0;
  // The smallest all-ones mask covering max, so that a rejected draw is rare (< 1/2).
  std::uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  std::uint64_t value = 0;
  if (max <= 0xFFFFFFFFu) {
    do {
      value = next32() & mask;
    } while (value > max);
  } else {
    // numpy takes the high half from the first draw.
    do {
      const std::uint64_t high = next32();
      value = ((high << 32) | next32()) & mask;
    } while (value > max);
  }
  return value;
}

}  // namespace mds::data
