#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <utility>

namespace mds::data {

// numpy's legacy np.random.RandomState(seed), the generator Megatron shuffles its index maps with
// (data.md §5.9). Only what the GPT dataset needs: integer seeding, bounded draws and shuffle.
class RandomState {
 public:
  // numpy seeds an integer with MT19937 init_genrand, which is exactly std::mt19937's seeding.
  explicit RandomState(std::uint32_t seed) : mt_(seed) {}

  std::uint32_t next32() { return static_cast<std::uint32_t>(mt_()); }

  // Uniform in [0, max], by numpy's masked rejection (legacy random_interval): not Lemire and not
  // std::uniform_int_distribution, whose draws differ. max == 0 consumes nothing.
  std::uint64_t random_interval(std::uint64_t max);

  // RandomState.shuffle of a 1-D array: Fisher-Yates from the back with random_interval(i).
  template <typename T>
  void shuffle(std::span<T> values) {
    for (std::size_t i = values.size(); i-- > 1;) {
      const auto j = static_cast<std::size_t>(random_interval(i));
      std::swap(values[i], values[j]);
    }
  }

 private:
  std::mt19937 mt_;
};

}  // namespace mds::data
