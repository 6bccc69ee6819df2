// convert-to-universal-checkpoint: a DeepSpeed pipeline checkpoint of any grid into a universal
// checkpoint, with upstream's flags (tools/convert_checkpoint/ds_to_universal.py). Progress goes
// to stderr.
#include <cstdio>

#include "base/log.h"
#include "base/program.h"
#include "base/stop_signal.h"
#include "ckpt/universal_convert.h"

int main(int argc, char** argv) {
  const mds::ckpt::UniversalArgs args = mds::ckpt::parse_universal_args(argc, argv);
  const mds::base::Log log("convert-to-universal-checkpoint", stderr, stderr);
  return mds::base::run_program("convert-to-universal-checkpoint", [&] {
    // Ctrl-C or SLURM's SIGTERM ends the conversion between files, removing the partial output.
    mds::base::install_stop_signal_handlers();
    mds::ckpt::convert_to_universal_checkpoint(args, log);
  });
}
