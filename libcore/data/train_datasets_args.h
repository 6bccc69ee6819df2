// From a validated `pretrain` command line to the arguments build_train_valid_test_datasets takes.
#pragma once
#include <string>
#include <vector>

#include "config/pretrain_args.h"
#include "data/train_datasets.h"

namespace mds::data {

// The data flags: --data-path with --split (mode 1), or the three --*-weighted-split-paths, each
// read from its -path file when that was given instead (mode 2). The sample counts, sequence
// length and seed are left for the caller.
TrainDatasetsArgs train_datasets_args(const config::PretrainArgs& args);

// Every dataset prefix the run reads, in flag order (a prefix in several groups appears as often).
std::vector<std::string> dataset_prefixes(const TrainDatasetsArgs& args);

}  // namespace mds::data
