// numpy's legacy RandomState against the vectors of data.md §8.3 (verified with numpy) and bounded
// draws above 32 bits taken from numpy 1.24's RandomState.randint, which uses the same masked path.
#include "data/numpy_random.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace mds::data {
namespace {

std::vector<std::int64_t> shuffled_range(RandomState& rng, std::int64_t n) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  rng.shuffle(std::span(values));
  return values;
}

std::vector<std::int64_t> head(const std::vector<std::int64_t>& values, std::size_t n) {
  return {values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n)};
}

TEST(NumpyRandom, SeedingIsInitGenrand) {
  RandomState rng(1234);
  const std::vector<std::uint32_t> expected = {822569775, 2137449171, 2671936806, 3512589365,
                                               1880026316};
  for (const std::uint32_t value : expected) EXPECT_EQ(rng.next32(), value);
  RandomState zero(0);
  EXPECT_EQ(zero.next32(), 2357136044u);
  EXPECT_EQ(zero.next32(), 2546248239u);
  EXPECT_EQ(zero.next32(), 3071714933u);
}

TEST(NumpyRandom, ShuffleTen) {
  RandomState seed0(0), seed42(42), seed1234(1234);
  EXPECT_EQ(shuffled_range(seed0, 10), (std::vector<std::int64_t>{2, 8, 4, 9, 1, 6, 7, 3, 0, 5}));
  EXPECT_EQ(shuffled_range(seed42, 10), (std::vector<std::int64_t>{8, 1, 5, 0, 7, 2, 9, 4, 3, 6}));
  EXPECT_EQ(shuffled_range(seed1234, 10),
            (std::vector<std::int64_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));
}

TEST(NumpyRandom, ShuffleLarge) {
  RandomState a(1234);
  EXPECT_EQ(head(shuffled_range(a, 1000), 10),
            (std::vector<std::int64_t>{681, 990, 155, 768, 438, 363, 688, 555, 620, 99}));
  RandomState b(1234);
  EXPECT_EQ(head(shuffled_range(b, 100003), 10),
            (std::vector<std::int64_t>{84826, 74372, 88626, 51882, 11306, 7660, 63829, 71505, 91108,
                                       14428}));
}

TEST(NumpyRandom, GeneratorContinuesAcrossShuffles) {
  RandomState rng(1234);
  EXPECT_EQ(shuffled_range(rng, 5), (std::vector<std::int64_t>{4, 0, 1, 2, 3}));
  std::vector<std::int32_t> values = {5, 6, 7};
  rng.shuffle(std::span(values));
  EXPECT_EQ(values, (std::vector<std::int32_t>{6, 7, 5}));
}

TEST(NumpyRandom, ShuffleOfOneOrNoneDrawsNothing) {
  RandomState rng(1234);
  std::vector<int> one = {9};
  rng.shuffle(std::span(one));
  rng.shuffle(std::span<int>());
  EXPECT_EQ(one, std::vector<int>{9});
  EXPECT_EQ(rng.next32(), 822569775u);
}

TEST(NumpyRandom, IntervalZeroDrawsNothing) {
  RandomState rng(1234);
  EXPECT_EQ(rng.random_interval(0), 0u);
  EXPECT_EQ(rng.next32(), 822569775u);
}

// RandomState(1234).randint(0, max + 1, dtype=np.uint64), four times, numpy 1.24.
TEST(NumpyRandom, IntervalMatchesNumpyOnBothPaths) {
  const struct {
    std::uint64_t max;
    std::vector<std::uint64_t> draws;
  } cases[] = {
      {0xFFFFFFFFull, {822569775, 2137449171, 2671936806, 3512589365}},
      {0x100000000ull, {3512589365, 2629000564, 3312965625, 852631582}},  // first 64-bit max
      {0x1FFFFFFFFull, {6432416467, 3512589365, 2629000564, 3312965625}},
      {(1ull << 40) + 12345, {878802328948, 656147994617, 617876871857, 662277595166}},
  };
  for (const auto& c : cases) {
    RandomState rng(1234);
    for (const std::uint64_t expected : c.draws) EXPECT_EQ(rng.random_interval(c.max), expected);
  }
}

TEST(NumpyRandom, IntervalStaysInRange) {
  RandomState rng(7);
  for (std::uint64_t max : {1ull, 2ull, 3ull, 5ull, 1000ull, 65536ull}) {
    for (int i = 0; i < 200; ++i) EXPECT_LE(rng.random_interval(max), max);
  }
}

}  // namespace
}  // namespace mds::data
