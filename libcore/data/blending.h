#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mds::data {

// Train, valid and test sample targets, in that order.
using SplitCounts = std::array<std::int64_t, 3>;

// `--data-path W1 P1 W2 P2 ...` as weights and prefixes; a single element is one prefix of weight
// 1. Fails on an odd count or a weight that is not a number.
struct WeightedPrefixes {
  std::vector<double> weights;
  std::vector<std::string> prefixes;
};
WeightedPrefixes parse_weighted_prefixes(std::span<const std::string> data_path);

// First normalisation (data.md §5.5 step 1): divided by their Python sum (left to right).
std::vector<double> normalize_weights(std::span<const double> weights);

// Step 2: ceil((target × w) × 1.005) per dataset and split, from normalized weights. The 0.5% extra
// leaves each component a few spare samples when the blend draws unevenly.
std::vector<SplitCounts> blended_sample_counts(std::span<const double> normalized_weights,
                                               const SplitCounts& targets);

// np.sum of a float64 array: numpy's pairwise summation, whose rounding differs from a plain loop
// once there are 8 or more elements.
double numpy_pairwise_sum(std::span<const double> values);

// Step 4: BlendableDataset's second normalisation, by the numpy sum.
std::vector<double> numpy_normalize_weights(std::span<const double> weights);

// Step 6 (helpers.cpp build_blending_indices): which dataset, and which sample of it, each blended
// sample comes from. Greedy: the dataset furthest below its share so far; ties go to the lower
// index.
struct BlendingIndices {
  std::vector<std::uint8_t> dataset_index;
  std::vector<std::int64_t> dataset_sample_index;
};
BlendingIndices build_blending_indices(std::span<const double> weights, std::size_t size);

}  // namespace mds::data
