#include "model/pipeline_partition.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "base/error.h"
#include "model/param_table.h"

namespace mds::model {
namespace {

constexpr std::string_view kFlag = "--pp-partition-method";

struct Probe {
  std::vector<std::int64_t> parts;
  bool success = false;
};

// The greedy probe of DeepSpeed's _lprobe over inclusive prefix sums: can every part stay
// within `bottleneck`? Index -1 wraps to the last element, as Python's list indexing does
// (reachable when the first weight alone exceeds the bottleneck).
Probe probe(const std::vector<double>& prefix, std::int64_t num_parts, double bottleneck) {
  const auto n = static_cast<std::int64_t>(prefix.size());
  const auto at = [&](std::int64_t i) {
    return prefix[static_cast<std::size_t>(i < 0 ? n + i : i)];
  };
  Probe result;
  result.parts.assign(static_cast<std::size_t>(num_parts + 1), n);
  result.parts[0] = 0;
  double target = bottleneck;
  const std::int64_t chunk = n / num_parts;
  std::int64_t step = chunk;
  for (std::int64_t p = 1; p < num_parts; ++p) {
    while (step < n && at(step) < target) step += chunk;
    // bisect_left over [step - chunk, min(step, n)).
    const auto first = prefix.begin() + (step - chunk);
    const auto last = prefix.begin() + std::min(step, n);
    const std::int64_t end = std::lower_bound(first, last, target) - prefix.begin();
    result.parts[static_cast<std::size_t>(p)] = end;
    if (end == n) {
      const double part_weight = prefix.back() - at(result.parts[static_cast<std::size_t>(p - 1)]);
      result.success = part_weight < bottleneck;
      return result;
    }
    target = at(end - 1) + bottleneck;
  }
  result.success = target >= prefix.back();
  return result;
}

std::string lower_ascii(std::string_view text) {
  std::string lowered(text);
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lowered;
}

// Local parameter count of the specs in [first, first + 1) as this TP rank builds them.
std::int64_t spec_params(const GptConfig& config, std::int64_t spec) {
  GptConfig one = config;
  one.stage_first_spec = spec;
  one.stage_end_spec = spec + 1;
  return ParamTable::build(one).local_numel();
}

std::vector<double> type_weights(const std::vector<PipeSpec>& specs, const std::string& method) {
  // Upstream takes method.split(':')[1]: the text between the first and a second colon.
  const std::size_t begin = method.find(':') + 1;
  const std::size_t end = method.find(':', begin);
  const std::string pattern =
      method.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  std::regex regex;
  try {
    regex = std::regex(pattern, std::regex::ECMAScript | std::regex::icase);
  } catch (const std::regex_error& error) {
    base::fail(kFlag, ": '", pattern, "' is not a valid regular expression (", error.what(), ")");
  }
  std::vector<double> weights(specs.size(), 0.0);
  bool any = false;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (std::regex_search(specs[i].name, regex)) {
      weights[i] = 1.0;
      any = true;
    }
  }
  if (!any) base::fail(kFlag, ": 'type:", pattern, "' matches no layer of the model");
  return weights;
}

}  // namespace

std::vector<std::int64_t> partition_uniform(std::int64_t num_items, std::int64_t num_parts) {
  if (num_parts <= 0) base::fail("partition_uniform: num_parts must be positive, got ", num_parts);
  if (num_items < 0) base::fail("partition_uniform: num_items must be >= 0, got ", num_items);
  std::vector<std::int64_t> parts(static_cast<std::size_t>(num_parts + 1));
  if (num_items <= num_parts) {
    for (std::int64_t p = 0; p <= num_parts; ++p)
      parts[static_cast<std::size_t>(p)] = std::min(p, num_items);
    return parts;
  }
  const std::int64_t chunk = num_items / num_parts;
  for (std::int64_t p = 0; p < num_parts; ++p) parts[static_cast<std::size_t>(p)] = chunk * p;
  parts.back() = num_items;
  return parts;
}

std::vector<std::int64_t> partition_balanced(const std::vector<double>& weights,
                                             std::int64_t num_parts, double eps) {
  if (num_parts <= 0) base::fail("partition_balanced: num_parts must be positive, got ", num_parts);
  const auto n = static_cast<std::int64_t>(weights.size());
  if (n <= num_parts) return partition_uniform(n, num_parts);

  std::vector<double> prefix(weights.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < weights.size(); ++i) prefix[i] = sum += weights[i];

  // Bisection on the weight of the heaviest part, between the ideal and the whole.
  double lower = prefix.back() / static_cast<double>(num_parts);
  double upper = prefix.back();
  while (upper > lower + eps) {
    const double mid = lower + (upper - lower) / 2;
    if (probe(prefix, num_parts, mid).success) {
      upper = mid;
    } else {
      lower = mid + eps;
    }
  }
  Probe result = probe(prefix, num_parts, upper);
  if (!result.success) {
    base::fail("partition_balanced: no partition of ", n, " weights into ", num_parts,
               " parts within the bottleneck ", upper);
  }
  return std::move(result.parts);
}

std::vector<PipeSpec> pipeline_specs(const GptConfig& config, bool half_precision) {
  const std::int64_t embedding = spec_params(config, GptConfig::kEmbeddingSpec);
  const std::int64_t layer = spec_params(config, GptConfig::layer_spec(0));
  const std::int64_t final_norm = spec_params(config, config.final_layernorm_spec());

  std::vector<PipeSpec> specs;
  specs.push_back({"_to_float16", "", 0});
  specs.push_back({"EmbeddingPipe", "embed", embedding});
  specs.push_back({"<lambda>", "", 0});  // transpose to [s, b, h]
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    specs.push_back({"ParallelTransformerLayerPipe", "", layer});
  }
  specs.push_back({"undo", "", 0});
  specs.push_back({"MixedFusedLayerNorm", "", final_norm});
  specs.push_back({"EmbeddingPipe", "embed", embedding});  // logits through the tied weight
  if (half_precision) specs.push_back({"float16_to_fp32", "", 0});
  return specs;
}

std::vector<std::int64_t> pipeline_partition(const GptConfig& config, bool half_precision,
                                             std::int64_t num_stages, std::string_view method) {
  if (num_stages <= 0)
    base::fail("pipeline_partition: num_stages must be positive, got ", num_stages);
  const std::vector<PipeSpec> specs = pipeline_specs(config, half_precision);
  const std::string lowered = lower_ascii(method);
  if (lowered == "uniform") {
    return partition_uniform(static_cast<std::int64_t>(specs.size()), num_stages);
  }
  if (lowered == "parameters") {
    std::vector<double> weights;
    for (const PipeSpec& spec : specs)
      weights.push_back(static_cast<double>(spec.trainable_params));
    return partition_balanced(weights, num_stages);
  }
  if (lowered.starts_with("type:"))
    return partition_balanced(type_weights(specs, lowered), num_stages);
  if (lowered == "profile") base::fail(kFlag, ": 'profile' is not implemented");
  base::fail(kFlag, ": unknown method '", method, "' (expected uniform, parameters or type:REGEX)");
}

void set_stage_specs(GptConfig& config, const std::vector<std::int64_t>& parts,
                     std::int64_t stage) {
  const auto stages = static_cast<std::int64_t>(parts.size()) - 1;
  if (stage < 0 || stage >= stages) {
    base::fail("set_stage_specs: stage ", stage, " is outside [0, ", stages, ")");
  }
  const std::int64_t first = parts[static_cast<std::size_t>(stage)];
  const std::int64_t end = parts[static_cast<std::size_t>(stage + 1)];
  if (end <= first) {
    base::fail(
        kFlag, ": pipeline stage ", stage, " of ", stages, " gets no layer (specs [", first, ", ",
        end, ")); choose another method or pipeline size so every stage holds a transformer layer");
  }
  config.stage_first_spec = first;
  config.stage_end_spec = end;
}

}  // namespace mds::model
