#include "ops/cpu/local_rank_threads.h"

#include <gtest/gtest.h>
#include <omp.h>

namespace mds::ops::cpu {
namespace {

TEST(LocalRankThreads, UnboundRanksShareTheNode) {
  EXPECT_EQ(threads_per_local_rank({16, 16, false}, 4), 4);
  EXPECT_EQ(threads_per_local_rank({16, 16, false}, 3), 5);
  EXPECT_EQ(threads_per_local_rank({2, 2, false}, 4), 1);  // oversubscribed: one thread each
}

TEST(LocalRankThreads, OpenMpsCountIsKeptOtherwise) {
  EXPECT_EQ(threads_per_local_rank({16, 16, false}, 1), std::nullopt);  // one rank
  EXPECT_EQ(threads_per_local_rank({16, 16, true}, 4), std::nullopt);   // OMP_NUM_THREADS given
  EXPECT_EQ(threads_per_local_rank({4, 16, false}, 4), std::nullopt);   // bound by the launcher
  EXPECT_EQ(threads_per_local_rank({1, 2, false}, 2), std::nullopt);    // mpirun -np 2: a core each
}

TEST(LocalRankThreads, ThisProcessSeesItsCpus) {
  const CpuView cpus = this_process_cpus();
  EXPECT_GE(cpus.visible, 1);
  EXPECT_LE(cpus.visible, cpus.online);
}

TEST(LocalRankThreads, OneRankLeavesTheThreadCountAlone) {
  const int before = omp_get_max_threads();
  EXPECT_EQ(share_cpus_among_local_ranks(1), std::nullopt);
  EXPECT_EQ(omp_get_max_threads(), before);
}

}  // namespace
}  // namespace mds::ops::cpu
