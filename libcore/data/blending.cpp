#include "data/blending.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "data/dataset_split.h"

namespace mds::data {
namespace {

// numpy's PW_BLOCKSIZE: below it, eight interleaved accumulators; above, split in two.
constexpr std::size_t kPairwiseBlock = 128;
constexpr std::size_t kMaxBlendedDatasets = 255;  // dataset_index is uint8

double pairwise_sum(const double* values, std::size_t n) {
  if (n < 8) {
    double sum = -0.0;  // -0.0 so that a sum of negative zeros keeps its sign, as numpy's
    for (std::size_t i = 0; i < n; ++i) sum += values[i];
    return sum;
  }
  if (n <= kPairwiseBlock) {
    double r[8];
    for (std::size_t j = 0; j < 8; ++j) r[j] = values[j];
    std::size_t i = 8;
    for (; i < n - n % 8; i += 8) {
      for (std::size_t j = 0; j < 8; ++j) r[j] += values[i + j];
    }
    double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) sum += values[i];
    return sum;
  }
  std::size_t half = n / 2;
  half -= half % 8;
  return pairwise_sum(values, half) + pairwise_sum(values + half, n - half);
}

}  // namespace

WeightedPrefixes parse_weighted_prefixes(std::span<const std::string> data_path) {
  WeightedPrefixes result;
  if (data_path.size() == 1) {
    result.weights = {1.0};
    result.prefixes = {data_path[0]};
    return result;
  }
  if (data_path.empty() || data_path.size() % 2 != 0) {
    base::fail("--data-path: expected one prefix or pairs 'WEIGHT PREFIX ...', got ",
               data_path.size(), " values");
  }
  for (std::size_t i = 0; i < data_path.size(); i += 2) {
    result.weights.push_back(parse_python_float(data_path[i], "--data-path weight"));
    std::string_view prefix = data_path[i + 1];
    while (!prefix.empty() && (prefix.front() == ' ' || prefix.front() == '\t')) {
      prefix.remove_prefix(1);
    }
    while (!prefix.empty() && (prefix.back() == ' ' || prefix.back() == '\t')) {
      prefix.remove_suffix(1);
    }
    result.prefixes.emplace_back(prefix);
  }
  return result;
}

std::vector<double> normalize_weights(std::span<const double> weights) {
  double sum = 0.0;
  for (const double weight : weights) sum += weight;
  if (!(sum > 0.0)) base::fail("dataset weights must sum to more than 0");
  std::vector<double> normalized;
  for (const double weight : weights) normalized.push_back(weight / sum);
  return normalized;
}

std::vector<SplitCounts> blended_sample_counts(std::span<const double> normalized_weights,
                                               const SplitCounts& targets) {
  std::vector<SplitCounts> counts;
  for (const double weight : normalized_weights) {
    SplitCounts row{};
    for (std::size_t k = 0; k < 3; ++k) {
      row[k] =
          static_cast<std::int64_t>(std::ceil((static_cast<double>(targets[k]) * weight) * 1.005));
    }
    counts.push_back(row);
  }
  return counts;
}

double numpy_pairwise_sum(std::span<const double> values) {
  return pairwise_sum(values.data(), values.size());
}

std::vector<double> numpy_normalize_weights(std::span<const double> weights) {
  const double sum = numpy_pairwise_sum(weights);
  if (!(sum > 0.0)) base::fail("blended dataset weights must sum to more than 0");
  std::vector<double> normalized;
  for (const double weight : weights) normalized.push_back(weight / sum);
  return normalized;
}

BlendingIndices build_blending_indices(std::span<const double> weights, std::size_t size) {
  if (weights.empty()) base::fail("a blended dataset needs at least one dataset");
  if (weights.size() >= kMaxBlendedDatasets) {
    base::fail("a blended dataset takes fewer than ", kMaxBlendedDatasets, " datasets, got ",
               weights.size());
  }
  BlendingIndices out;
  out.dataset_index.resize(size);
  out.dataset_sample_index.resize(size);
  std::vector<std::int64_t> counts(weights.size(), 0);
  for (std::size_t s = 0; s < size; ++s) {
    const double x = std::max(static_cast<double>(s), 1.0);
    std::size_t best = 0;
    double best_error = weights[0] * x - static_cast<double>(counts[0]);
    for (std::size_t d = 1; d < weights.size(); ++d) {
      const double error = weights[d] * x - static_cast<double>(counts[d]);
      if (error > best_error) {
        best = d;
        best_error = error;
      }
    }
    out.dataset_index[s] = static_cast<std::uint8_t>(best);
    out.dataset_sample_index[s] = counts[best]++;
  }
  return out;
}

}  // namespace mds::data
