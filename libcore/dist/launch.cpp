#include "dist/launch.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "base/error.h"

namespace mds::dist {
namespace {

std::optional<int> read_int(const EnvLookup& env, const std::string& name) {
  const std::optional<std::string> text = env(name);
  if (!text) return std::nullopt;
  int value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end || text->empty()) {
    base::fail("launch environment: ", name, "='", *text, "' is not an integer");
  }
  return value;
}

LaunchInfo make_info(Launcher launcher, std::string_view rank_var, int rank,
                     std::string_view size_var, int size, std::optional<int> local_rank) {
  if (size < 1) base::fail("launch environment: ", size_var, "=", size, " must be at least 1");
  if (rank < 0 || rank >= size) {
    base::fail("launch environment: ", rank_var, "=", rank, " is outside [0, ", size_var, "=", size,
               ")");
  }
  if (local_rank && *local_rank < 0) {
    base::fail("launch environment: local rank ", *local_rank, " is negative");
  }
  LaunchInfo info;
  info.launcher = launcher;
  info.rank = rank;
  info.world_size = size;
  info.local_rank = local_rank.value_or(0);
  return info;
}

[[noreturn]] void fail_tasks_per_node(std::string_view list) {
  base::fail("launch environment: SLURM_STEP_TASKS_PER_NODE='", list,
             "' is not srun's list (counts like 2(x3),1)");
}

// Removes a positive integer from the front of `rest`.
int take_count(std::string_view& rest, std::string_view list) {
  int value = 0;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (ec != std::errc() || value < 1) fail_tasks_per_node(list);
  rest.remove_prefix(static_cast<std::size_t>(ptr - rest.data()));
  return value;
}

// A launcher is recognised by its rank variable; its size variable must then be present too.
int require(const EnvLookup& env, const std::string& name, std::string_view because) {
  const std::optional<int> value = read_int(env, name);
  if (!value) base::fail("launch environment: ", because, " is set but ", name, " is not");
  return *value;
}

}  // namespace

int slurm_tasks_on_node(std::string_view tasks_per_node, int node) {
  // (tasks, nodes) entries; the whole list is read, so a malformed end fails on every node.
  std::vector<std::pair<int, int>> entries;
  std::string_view rest = tasks_per_node;
  while (true) {
    const int count = take_count(rest, tasks_per_node);
    int repeat = 1;
    if (rest.starts_with("(x")) {
      rest.remove_prefix(2);
      repeat = take_count(rest, tasks_per_node);
      if (!rest.starts_with(")")) fail_tasks_per_node(tasks_per_node);
      rest.remove_prefix(1);
    }
    entries.emplace_back(count, repeat);
    if (rest.empty()) break;
    if (!rest.starts_with(",")) fail_tasks_per_node(tasks_per_node);
    rest.remove_prefix(1);
  }
  std::int64_t first = 0;  // the first node of each entry
  for (const auto& [count, repeat] : entries) {
    if (node >= first && node < first + repeat) return count;
    first += repeat;
  }
  base::fail("launch environment: SLURM_STEP_TASKS_PER_NODE='", tasks_per_node, "' lists ", first,
             " nodes, not node ", node);
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::string_view launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::kSingle:
      return "single process";
    case Launcher::kMpirun:
      return "mpirun";
    case Launcher::kSlurm:
      return "srun";
    case Launcher::kTorchrun:
      return "torchrun-style (RANK/WORLD_SIZE)";
  }
  return "?";
}

LaunchInfo detect_launch(const EnvLookup& env) {
  LaunchInfo info;
  if (const std::optional<int> rank = read_int(env, "OMPI_COMM_WORLD_RANK")) {
    const int size = require(env, "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK");
    info = make_info(Launcher::kMpirun, "OMPI_COMM_WORLD_RANK", *rank, "OMPI_COMM_WORLD_SIZE", size,
                     read_int(env, "OMPI_COMM_WORLD_LOCAL_RANK"));
    info.local_size = read_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(1);
  } else if (env("SLURM_STEP_NUM_TASKS")) {
    // Only srun sets the step's task count. A batch script (one process, not started by srun)
    // also sees SLURM_PROCID=0 and the allocation's SLURM_NTASKS, and must not count as N ranks.
    const int size = require(env, "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_TASKS");
    const int procid = require(env, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS");
    info = make_info(Launcher::kSlurm, "SLURM_PROCID", procid, "SLURM_STEP_NUM_TASKS", size,
                     read_int(env, "SLURM_LOCALID"));
    const std::optional<std::string> per_node = env("SLURM_STEP_TASKS_PER_NODE");
    if (per_node) {
      info.local_size = slurm_tasks_on_node(*per_node, read_int(env, "SLURM_NODEID").value_or(0));
    }
  } else if (const std::optional<int> torch_rank = read_int(env, "RANK")) {
    const int size = require(env, "WORLD_SIZE", "RANK");
    info = make_info(Launcher::kTorchrun, "RANK", *torch_rank, "WORLD_SIZE", size,
                     read_int(env, "LOCAL_RANK"));
    info.local_size = read_int(env, "LOCAL_WORLD_SIZE").value_or(1);
  } else {
    info.local_rank = read_int(env, "LOCAL_RANK").value_or(0);
  }
  if (info.local_size < 1) {
    base::fail("launch environment: ", info.local_size, " ranks on this node: must be at least 1");
  }
  info.master_addr = env("MASTER_ADDR").value_or("");
  return info;
}

void check_launch_matches_mpi(const LaunchInfo& info, int mpi_rank, int mpi_world_size) {
  if (info.rank == mpi_rank && info.world_size == mpi_world_size) return;
  const std::string seen =
      base::cat("launched by ", launcher_name(info.launcher), " as rank ", info.rank, " of ",
                info.world_size, ", but MPI sees rank ", mpi_rank, " of ", mpi_world_size);
  if (info.launcher == Launcher::kTorchrun) {
    base::fail(seen,
               ": MPI cannot join a torchrun-style rendezvous (RANK/WORLD_SIZE/MASTER_ADDR); "
               "start the ranks with mpirun -np N, or srun --mpi=pmix");
  }
  if (info.launcher == Launcher::kSlurm) {
    base::fail(seen,
               ": srun did not connect the tasks to MPI; use srun --mpi=pmix (or MpiDefault=pmix "
               "in slurm.conf), or mpirun inside the allocation");
  }
  base::fail(seen, ": start every rank with the same mpirun -np N, or srun --mpi=pmix");
}

double timeout_seconds_from_env(const EnvLookup& env, double fallback) {
  const std::optional<std::string> text = env("MDS_DIST_TIMEOUT_S");
  if (!text) return fallback;
  char* end = nullptr;
  const double value = std::strtod(text->c_str(), &end);
  if (text->empty() || end != text->c_str() + text->size() || !std::isfinite(value) || value <= 0) {
    base::fail("MDS_DIST_TIMEOUT_S='", *text, "' is not a positive number of seconds");
  }
  return value;
}

}  // namespace mds::dist
