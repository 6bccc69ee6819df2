#include "data/train_datasets.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <utility>

#include "base/error.h"
#include "data/dataset_split.h"
#include "io/indexed_dataset.h"

namespace mds::data {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::array<const char*, 3> kSplitNames = {"train", "valid", "test"};

void say(const LogFn& log, const std::string& line) {
  if (log) log(line);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string format_fixed(double value, int precision) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", precision, value);
  return text;
}

// gpt_dataset.py get_indexed_dataset_, with its messages.
std::shared_ptr<const io::IndexedDataset> open_indexed(const std::string& prefix,
                                                       const LogFn& log) {
  say(log, " > building dataset index ...");
  const auto start = Clock::now();
  auto data = std::make_shared<const io::IndexedDataset>(io::IndexedDataset::open(prefix));
  say(log, base::cat(" > finished creating indexed dataset in ",
                     format_fixed(seconds_since(start), 6), " seconds"));
  say(log, base::cat("    number of documents: ", data->num_sequences()));
  return data;
}

void say_range(const LogFn& log, const std::string& label, DocumentRange range) {
  say(log, base::cat("    ", label, ":"));
  say(log, base::cat("     document indices in [", range.begin, ", ", range.end, ") total of ",
                     range.end - range.begin, " documents"));
}

std::shared_ptr<const GptDataset> make_gpt(const std::shared_ptr<const io::IndexedDataset>& data,
                                           const std::string& name, DocumentRange range,
                                           std::int64_t num_samples, const TrainDatasetsArgs& args,
                                           const LogFn& log) {
  const IndexMapRequest request{name,        data->prefix(),  range,
                                num_samples, args.seq_length, args.seed};
  return std::make_shared<const GptDataset>(GptDataset::create(data, request, log));
}

// _build_train_valid_test_datasets: one prefix split by --split into three document ranges.
std::array<std::shared_ptr<const GptDataset>, 3> build_split_datasets(const std::string& prefix,
                                                                      const std::string& split,
                                                                      const SplitCounts& counts,
                                                                      const TrainDatasetsArgs& args,
                                                                      const LogFn& log) {
  const auto data = open_indexed(prefix, log);
  const auto ranges =
      split_document_ranges(split, static_cast<std::int64_t>(data->num_sequences()));
  say(log, " > dataset split:");
  say_range(log, "train", ranges[0]);
  say_range(log, "validation", ranges[1]);
  say_range(log, "test", ranges[2]);
  std::array<std::shared_ptr<const GptDataset>, 3> datasets;
  for (std::size_t k = 0; k < 3; ++k) {
    if (!ranges[k].empty()) {
      datasets[k] = make_gpt(data, kSplitNames[k], ranges[k], counts[k], args, log);
    }
  }
  return datasets;
}

// BlendableDataset with the lines its constructor and helpers.build_blending_indices print.
std::shared_ptr<const BlendedDataset> make_blend(
    std::vector<std::shared_ptr<const GptDataset>> datasets, const std::vector<double>& weights,
    const LogFn& log) {
  const auto start = Clock::now();
  auto blend = std::make_shared<const BlendedDataset>(std::move(datasets), weights);
  if (log) {
    const std::vector<double> normalized = numpy_normalize_weights(weights);
    std::vector<std::int64_t> drawn(normalized.size(), 0);
    for (const std::uint8_t d : blend->indices().dataset_index) ++drawn[d];
    say(log, "> building indices for blendable datasets ...");
    say(log, " > sample ratios:");
    for (std::size_t d = 0; d < normalized.size(); ++d) {
      // C++ stream formatting, as helpers.cpp prints them.
      std::ostringstream line;
      line << "   dataset " << d << ", input: " << normalized[d]
           << ", achieved: " << static_cast<double>(drawn[d]) / static_cast<double>(blend->size());
      say(log, line.str());
    }
    say(log, base::cat("> elapsed time for building blendable dataset indices: ",
                       format_fixed(seconds_since(start), 2), " (sec)"));
  }
  return blend;
}

void build_mode1(const TrainDatasetsArgs& args, const LogFn& log, TrainValidTestDatasets& out) {
  const std::string split = args.split.value_or("969, 30, 1");
  if (args.data_path.size() == 1) {
    const auto datasets =
        build_split_datasets(args.data_path[0], split, args.num_samples, args, log);
    if (datasets[0]) out.train = make_sample_source("train", datasets[0]);
    if (datasets[1]) out.valid.push_back(make_sample_source("valid", datasets[1]));
    if (datasets[2]) out.test.push_back(make_sample_source("test", datasets[2]));
    return;
  }
  const WeightedPrefixes parsed = parse_weighted_prefixes(args.data_path);
  const std::vector<double> weights = normalize_weights(parsed.weights);
  const std::vector<SplitCounts> counts = blended_sample_counts(weights, args.num_samples);
  std::array<std::vector<std::shared_ptr<const GptDataset>>, 3> components;
  for (std::size_t i = 0; i < parsed.prefixes.size(); ++i) {
    const auto datasets = build_split_datasets(parsed.prefixes[i], split, counts[i], args, log);
    for (std::size_t k = 0; k < 3; ++k) {
      if (datasets[k]) components[k].push_back(datasets[k]);
    }
  }
  // Upstream blends whatever components have the split; BlendedDataset fails clearly when only
  // some of them do (upstream's assertion on the weight count).
  if (!components[0].empty()) {
    out.train = make_sample_source("train", make_blend(std::move(components[0]), weights, log));
  }
  if (!components[1].empty()) {
    out.valid.push_back(
        make_sample_source("valid", make_blend(std::move(components[1]), weights, log)));
  }
  if (!components[2].empty()) {
    out.test.push_back(
        make_sample_source("test", make_blend(std::move(components[2]), weights, log)));
  }
}

// _build_single_datasets: one path of a mode-2 group, restricted to its START:END range.
std::shared_ptr<const GptDataset> build_group_member(const WeightedSplitGroup& group,
                                                     const WeightedSplitPath& path,
                                                     std::int64_t num_samples,
                                                     const TrainDatasetsArgs& args,
                                                     const LogFn& log) {
  const auto data = open_indexed(path.prefix, log);
  const DocumentRange range =
      split_by_range(path.start, path.end, static_cast<std::int64_t>(data->num_sequences()));
  say(log, " > dataset split:");
  say_range(log, group.name, range);
  if (range.empty()) {
    // Upstream would go on with no dataset and fail later.
    base::fail("dataset group '", group.name, "': range ", path.start, ":", path.end, " of ",
               path.prefix, " (", data->num_sequences(), " documents) selects no document");
  }
  return make_gpt(data, group.name, range, num_samples, args, log);
}

// build_dataset_group: one group for one of train/valid/test (`split` indexes num_samples).
SampleSource build_group(const std::string& text, std::size_t split, const TrainDatasetsArgs& args,
                         const LogFn& log) {
  const WeightedSplitGroup group = parse_weighted_split_group(text);
  if (group.paths.size() == 1) {
    return make_sample_source(
        group.name, build_group_member(group, group.paths[0], args.num_samples[split], args, log));
  }
  std::vector<double> raw_weights;
  for (const auto& path : group.paths) raw_weights.push_back(path.weight);
  const std::vector<double> weights = normalize_weights(raw_weights);
  const std::vector<SplitCounts> counts = blended_sample_counts(weights, args.num_samples);
  std::vector<std::shared_ptr<const GptDataset>> datasets;
  for (std::size_t i = 0; i < group.paths.size(); ++i) {
    datasets.push_back(build_group_member(group, group.paths[i], counts[i][split], args, log));
  }
  return make_sample_source(group.name, make_blend(std::move(datasets), weights, log));
}

void build_mode2(const TrainDatasetsArgs& args, const LogFn& log, TrainValidTestDatasets& out) {
  if (args.train_weighted_split_paths.size() != 1) {
    base::fail("--train-weighted-split-paths: only 1 dataset group is allowed, got ",
               args.train_weighted_split_paths.size());
  }
  out.train = build_group(args.train_weighted_split_paths[0], 0, args, log);
  for (const auto& text : args.valid_weighted_split_paths) {
    out.valid.push_back(build_group(text, 1, args, log));
  }
  for (const auto& text : args.test_weighted_split_paths) {
    out.test.push_back(build_group(text, 2, args, log));
  }
}

}  // namespace

SampleSource make_sample_source(std::string name, std::shared_ptr<const GptDataset> dataset) {
  const std::int64_t size = dataset->size();
  return {std::move(name), size,
          [dataset = std::move(dataset)](std::int64_t i) { return dataset->sample(i); }};
}

SampleSource make_sample_source(std::string name, std::shared_ptr<const BlendedDataset> dataset) {
  const std::int64_t size = dataset->size();
  return {std::move(name), size,
          [dataset = std::move(dataset)](std::int64_t i) { return dataset->sample(i); }};
}

TrainValidTestDatasets build_train_valid_test_datasets(const TrainDatasetsArgs& args,
                                                       const LogFn& log) {
  const bool weighted = !args.train_weighted_split_paths.empty() ||
                        !args.valid_weighted_split_paths.empty() ||
                        !args.test_weighted_split_paths.empty();
  if (!args.data_path.empty() && weighted) {
    base::fail(
        "--data-path (with --split) and --(train|valid|test)-weighted-split-paths are "
        "mutually exclusive");
  }
  if (weighted && args.split) {
    base::fail(
        "--split applies to --data-path only, not to --(train|valid|test)-weighted-split-paths");
  }
  if (args.data_path.empty() && args.train_weighted_split_paths.empty()) {
    base::fail("no training data: give --data-path or --train-weighted-split-paths");
  }
  if (args.seq_length <= 0) base::fail("--seq-length must be positive");

  say(log, "> building train, validation, and test datasets ...");
  say(log, " > datasets target sizes (minimum size):");
  say(log, base::cat("    train:      ", args.num_samples[0]));
  say(log, base::cat("    validation: ", args.num_samples[1]));
  say(log, base::cat("    test:       ", args.num_samples[2]));
  say(log, "> building train, validation, and test datasets for GPT ...");
  TrainValidTestDatasets out;
  if (!args.data_path.empty()) {
    build_mode1(args, log, out);
  } else {
    build_mode2(args, log, out);
  }
  say(log, "> finished creating GPT datasets ...");
  return out;
}

}  // namespace mds::data
