#include "dist/launch.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

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

// A launcher is recognised by its rank variable; its size variable must then be present too.
int require(const EnvLookup& env, const std::string& name, std::string_view because) {
  const std::optional<int> value = read_int(env, name);
  if (!value) base::fail("launch environment: ", because, " is set but ", name, " is not");
  return *value;
}

}  // namespace

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
  } else if (env("SLURM_STEP_NUM_TASKS")) {
    // Only srun sets the step's task count. A batch script (one process, not started by srun)
    // also sees SLURM_PROCID=0 and the allocation's SLURM_NTASKS, and must not count as N ranks.
    const int size = require(env, "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_TASKS");
    const int procid = require(env, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS");
    info = make_info(Launcher::kSlurm, "SLURM_PROCID", procid, "SLURM_STEP_NUM_TASKS", size,
                     read_int(env, "SLURM_LOCALID"));
  } else if (const std::optional<int> torch_rank = read_int(env, "RANK")) {
    const int size = require(env, "WORLD_SIZE", "RANK");
    info = make_info(Launcher::kTorchrun, "RANK", *torch_rank, "WORLD_SIZE", size,
                     read_int(env, "LOCAL_RANK"));
  } else {
    info.local_rank = read_int(env, "LOCAL_RANK").value_or(0);
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
