#include "data/train_datasets_args.h"

#include "data/blending.h"
#include "data/dataset_split.h"

namespace mds::data {

TrainDatasetsArgs train_datasets_args(const config::PretrainArgs& args) {
  TrainDatasetsArgs out;
  if (args.data_path) out.data_path = *args.data_path;
  out.split = args.split;
  const auto groups = [](const auto& strings, const auto& file, const char* flag) {
    return weighted_split_groups(strings, file, flag).value_or(std::vector<std::string>{});
  };
  out.train_weighted_split_paths =
      groups(args.train_weighted_split_paths, args.train_weighted_split_paths_path,
             "--train-weighted-split-paths");
  out.valid_weighted_split_paths =
      groups(args.valid_weighted_split_paths, args.valid_weighted_split_paths_path,
             "--valid-weighted-split-paths");
  out.test_weighted_split_paths =
      groups(args.test_weighted_split_paths, args.test_weighted_split_paths_path,
             "--test-weighted-split-paths");
  return out;
}

std::vector<std::string> dataset_prefixes(const TrainDatasetsArgs& args) {
  std::vector<std::string> prefixes;
  if (!args.data_path.empty()) prefixes = parse_weighted_prefixes(args.data_path).prefixes;
  for (const auto* groups : {&args.train_weighted_split_paths, &args.valid_weighted_split_paths,
                             &args.test_weighted_split_paths}) {
    for (const std::string& text : *groups) {
      for (const WeightedSplitPath& path : parse_weighted_split_group(text).paths) {
        prefixes.push_back(path.prefix);
      }
    }
  }
  return prefixes;
}

}  // namespace mds::data
