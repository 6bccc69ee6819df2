#include "ckpt/universal_args.h"

#include "config/flags.h"
#include "config/pretrain_flags.h"

namespace mds::ckpt {

UniversalArgs parse_universal_args(int argc, char** argv) {
  UniversalArgs args;
  config::FlagSet flags(
      "convert-to-universal-checkpoint",
      "Convert a DeepSpeed pipeline checkpoint (as pretrain --save writes it, any TP x PP x DP "
      "grid, any precision and ZeRO stage) into a universal checkpoint: per parameter the full "
      "fp32 weight and Adam moments in zero/<name>/{fp32,exp_avg,exp_avg_sq}.pt, from which "
      "pretrain --universal-checkpoint resumes on any grid (upstream "
      "tools/convert_checkpoint/ds_to_universal.py).");
  flags.allow_abbreviations(true);
  config::pretrain_flags::FlagGroup g(flags, "Conversion");
  g.text("--input_folder", args.input_folder,
         "the checkpoint: a global_stepN folder, or the folder holding `latest` (its tag is "
         "converted)")
      ->required();
  g.text("--output_folder", args.output_folder,
         "the universal checkpoint's folder (e.g. <save>/global_step5_universal), written under "
         "a temporary name and renamed into place; latest_universal is written beside it")
      ->required();
  g.integer("--num_extract_workers", args.num_extract_workers,
            "threads reading the rank files (each holds one rank's optimizer state)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}));
  g.integer("--num_merge_workers", args.num_merge_workers,
            "threads merging parameters (each holds about two copies of one parameter)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}));
  g.integer("--target_tp", args.target_tp,
            "accepted and ignored, as upstream does: the output has no tensor-parallel size");
  g.integer("--target_pp", args.target_pp,
            "accepted and ignored, as upstream does: the output has no pipeline size");
  flags.parse(argc, argv);
  return args;
}

}  // namespace mds::ckpt
