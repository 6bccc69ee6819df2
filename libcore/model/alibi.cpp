#include "model/alibi.h"

#include <cmath>

#include "base/error.h"

namespace mds::model {
namespace {

std::vector<double> power_of_two_slopes(std::int64_t n) {
  const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(n)) - 3.0)));
  std::vector<double> slopes;
  for (std::int64_t i = 0; i < n; ++i) {
    slopes.push_back(start * std::pow(start, static_cast<double>(i)));
  }
  return slopes;
}

float rounded(float value, tensor::DType dtype) {
  switch (dtype) {
    case tensor::DType::kBFloat16:
      return tensor::to_float(tensor::to_bfloat16(value));
    case tensor::DType::kFloat16:
      return tensor::to_float(tensor::to_float16(value));
    default:
      return value;
  }
}

}  // namespace

std::vector<double> alibi_slopes(std::int64_t heads) {
  if (heads < 1) base::fail("alibi_slopes: need at least one head, got ", heads);
  const double log2_heads = std::log2(static_cast<double>(heads));
  if (log2_heads == std::floor(log2_heads)) return power_of_two_slopes(heads);
  const auto closest = static_cast<std::int64_t>(std::pow(2.0, std::floor(log2_heads)));
  std::vector<double> slopes = power_of_two_slopes(closest);
  const std::vector<double> doubled = alibi_slopes(2 * closest);
  for (std::int64_t i = 0; i < heads - closest; ++i) {
    slopes.push_back(doubled[static_cast<std::size_t>(2 * i)]);
  }
  return slopes;
}

std::vector<float> alibi_key_bias(std::int64_t heads, std::int64_t first_head,
                                  std::int64_t local_heads, std::int64_t keys,
                                  tensor::DType dtype) {
  if (first_head < 0 || local_heads < 0 || first_head + local_heads > heads) {
    base::fail("alibi_key_bias: heads [", first_head, ", ", first_head + local_heads,
               ") are not among the ", heads);
  }
  const std::vector<double> slopes = alibi_slopes(heads);
  std::vector<float> bias(static_cast<std::size_t>(local_heads * keys));
  for (std::int64_t h = 0; h < local_heads; ++h) {
    const auto slope = static_cast<float>(slopes[static_cast<std::size_t>(first_head + h)]);
    for (std::int64_t j = 0; j < keys; ++j) {
      bias[static_cast<std::size_t>(h * keys + j)] = rounded(slope * static_cast<float>(j), dtype);
    }
  }
  return bias;
}

}  // namespace mds::model
