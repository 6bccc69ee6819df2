// Command line of convert-to-universal-checkpoint (upstream v0.1's
// tools/convert_checkpoint/ds_to_universal.py, checkpoints.md §3.2).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace mds::ckpt {

struct UniversalArgs {
  std::string input_folder;   // a global_stepN folder, or a checkpoint root with `latest`
  std::string output_folder;  // the universal checkpoint's folder; latest_universal goes beside it
  std::int64_t num_extract_workers = 4;
  std::int64_t num_merge_workers = 2;
  // Parsed and ignored, as upstream does: a universal checkpoint has no grid.
  std::optional<std::int64_t> target_tp;
  std::optional<std::int64_t> target_pp;
};

// --help lists every flag and exits 0; a bad command line (a missing folder flag, a worker count
// below 1) prints one "convert-to-universal-checkpoint: error: ..." line and exits 2. Unique
// prefixes of flags are accepted, as upstream's argparse parser accepts them.
UniversalArgs parse_universal_args(int argc, char** argv);

}  // namespace mds::ckpt
