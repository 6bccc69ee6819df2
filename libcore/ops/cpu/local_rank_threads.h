// OpenMP's thread count when several ranks share a node. OpenMP starts as many threads as the
// process may use CPUs; ranks a launcher did not bind (mpirun with more than two ranks binds to
// sockets, or not at all when oversubscribed) then each start one per CPU of the node, and every
// barrier waits for threads descheduled by the other ranks' (measured on 2 cores: a unit test
// beside another went from 0.35 s to 60-85 s). torchrun answers with one thread per rank; mds gives
// each rank its share of the node.
#pragma once
#include <optional>
#include <string>

namespace mds::ops::cpu {

struct CpuView {
  int visible = 1;           // CPUs this process may run on (its affinity mask)
  int online = 1;            // CPUs of the node
  bool threads_set = false;  // OMP_NUM_THREADS was given
};

CpuView this_process_cpus();

// Threads for each of `local_ranks` ranks on a node: the node's CPUs divided among them (at least
// one). Nothing, to keep OpenMP's own count, for one rank, when the user set OMP_NUM_THREADS, or
// when the launcher bound this process to part of the node (its share is then its mask).
std::optional<int> threads_per_local_rank(const CpuView& cpus, int local_ranks);

// Applies threads_per_local_rank to this process; returns the line to log when it changed the
// thread count.
std::optional<std::string> share_cpus_among_local_ranks(int local_ranks);

}  // namespace mds::ops::cpu
