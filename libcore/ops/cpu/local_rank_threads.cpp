#include "ops/cpu/local_rank_threads.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace mds::ops::cpu {

CpuView this_process_cpus() {
  CpuView cpus;
  cpus.online = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  cpus.visible =
      sched_getaffinity(0, sizeof(mask), &mask) == 0 ? std::max(1, CPU_COUNT(&mask)) : cpus.online;
  cpus.threads_set = std::getenv("OMP_NUM_THREADS") != nullptr;
  return cpus;
}

std::optional<int> threads_per_local_rank(const CpuView& cpus, int local_ranks) {
  if (local_ranks <= 1 || cpus.threads_set || cpus.visible < cpus.online) return std::nullopt;
  return std::max(1, cpus.online / local_ranks);
}

std::optional<std::string> share_cpus_among_local_ranks(int local_ranks) {
  const CpuView cpus = this_process_cpus();
  const std::optional<int> threads = threads_per_local_rank(cpus, local_ranks);
  if (!threads || *threads == omp_get_max_threads()) return std::nullopt;
  omp_set_num_threads(*threads);
  return std::to_string(local_ranks) + " ranks share this node's " + std::to_string(cpus.online) +
         " CPUs: " + std::to_string(*threads) + " OpenMP thread" + (*threads == 1 ? "" : "s") +
         " each (OMP_NUM_THREADS sets another count)";
}

}  // namespace mds::ops::cpu
