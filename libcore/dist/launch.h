#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mds::dist {

// Reads one environment variable; nullopt when unset. Passed in (rather than calling getenv) so the
// parsing below is testable with a map.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The real process environment.
EnvLookup process_env();

enum class Launcher {
  kSingle,    // no launcher variables: one process
  kMpirun,    // OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK
  kSlurm,     // srun: SLURM_PROCID / SLURM_STEP_NUM_TASKS / SLURM_LOCALID
  kTorchrun,  // torchrun / torch.distributed.launch / deepspeed: RANK / WORLD_SIZE / LOCAL_RANK
};

std::string_view launcher_name(Launcher launcher);

// What the launcher told this process. local_rank picks the GPU of a node.
struct LaunchInfo {
  Launcher launcher = Launcher::kSingle;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;       // this node's ranks; 1 where the launcher does not say
  std::string master_addr;  // MASTER_ADDR when set (torchrun style); informational
};

// Detects the launcher from the environment. Precedence: mpirun, then srun, then torchrun style
// (mpirun inside a SLURM allocation carries both, and mpirun's variables describe the MPI world).
// Fails with one line naming a variable that is not an integer or out of range.
LaunchInfo detect_launch(const EnvLookup& env);

// The entry of srun's SLURM_STEP_TASKS_PER_NODE ("2(x3),1": nodes 0-2 run 2 tasks, node 3 one)
// for node `node`; fails with one line on a malformed list or a node past its end.
int slurm_tasks_on_node(std::string_view tasks_per_node, int node);

// Fails unless the launcher's rank and world size are those of the MPI world this process joined,
// explaining how to launch (mpirun, or srun --mpi=pmix) when they differ — e.g. a torchrun-style
// launch, which MPI cannot join, or srun without PMIx, where every process is a world of one.
void check_launch_matches_mpi(const LaunchInfo& info, int mpi_rank, int mpi_world_size);

// Seconds a blocking communication may wait before the job is stopped: MDS_DIST_TIMEOUT_S when set
// (a positive decimal number), otherwise `fallback`.
double timeout_seconds_from_env(const EnvLookup& env, double fallback);

}  // namespace mds::dist
