// merge-mp-partitions: re-partitions a checkpoint's weights for another TP × PP grid, with
// upstream's flags (tools/merge_mp_partitions.py). Progress goes to stderr.
#include <cstdio>

#include "base/log.h"
#include "base/program.h"
#include "ckpt/reshard.h"

int main(int argc, char** argv) {
  mds::ckpt::MergeMpArgs args = mds::ckpt::parse_merge_mp_args(argc, argv);
  const mds::base::Log log("merge-mp-partitions", stderr, stderr);
  return mds::base::run_program("merge-mp-partitions",
                                [&] { mds::ckpt::merge_mp_partitions(args, log); });
}
