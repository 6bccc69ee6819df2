#include "dist/launch.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/error.h"

namespace mds::dist {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const base::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DistLaunch, NoVariablesIsOneProcess) {
  const LaunchInfo info = detect_launch(env_of({}));
  EXPECT_EQ(info.launcher, Launcher::kSingle);
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_NO_THROW(check_launch_matches_mpi(info, 0, 1));
}

TEST(DistLaunch, Mpirun) {
  const LaunchInfo info = detect_launch(env_of({{"OMPI_COMM_WORLD_RANK", "5"},
                                                {"OMPI_COMM_WORLD_SIZE", "8"},
                                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                {"SLURM_PROCID", "0"},
                                                {"SLURM_NTASKS", "2"}}));
  EXPECT_EQ(info.launcher, Launcher::kMpirun);  // mpirun inside an allocation: mpirun wins
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_NO_THROW(check_launch_matches_mpi(info, 5, 8));
}

TEST(DistLaunch, Srun) {
  const LaunchInfo info = detect_launch(env_of({{"SLURM_PROCID", "3"},
                                                {"SLURM_NTASKS", "16"},
                                                {"SLURM_STEP_NUM_TASKS", "4"},
                                                {"SLURM_LOCALID", "3"}}));
  EXPECT_EQ(info.launcher, Launcher::kSlurm);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 3);
  const std::string message = error_of([&] { check_launch_matches_mpi(info, 0, 1); });
  EXPECT_NE(message.find("srun --mpi=pmix"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 3 of 4"), std::string::npos) << message;
}

// An sbatch script itself (not an srun step) is one process whatever the allocation's task count.
TEST(DistLaunch, BatchScriptWithoutSrunIsOneProcess) {
  const LaunchInfo info =
      detect_launch(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}}));
  EXPECT_EQ(info.launcher, Launcher::kSingle);
  EXPECT_NO_THROW(check_launch_matches_mpi(info, 0, 1));
}

TEST(DistLaunch, TorchrunStyle) {
  const LaunchInfo info = detect_launch(env_of({{"RANK", "2"},
                                                {"WORLD_SIZE", "4"},
                                                {"LOCAL_RANK", "0"},
                                                {"MASTER_ADDR", "node17"},
                                                {"MASTER_PORT", "6000"}}));
  EXPECT_EQ(info.launcher, Launcher::kTorchrun);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.master_addr, "node17");
  // MPI started as a singleton: it cannot join the torchrun rendezvous.
  const std::string message = error_of([&] { check_launch_matches_mpi(info, 0, 1); });
  EXPECT_NE(message.find("torchrun"), std::string::npos) << message;
  EXPECT_NE(message.find("mpirun"), std::string::npos) << message;
  EXPECT_NE(message.find("srun --mpi=pmix"), std::string::npos) << message;
  // A one-process torchrun-style launch (RANK=0 WORLD_SIZE=1) is fine.
  EXPECT_NO_THROW(
      check_launch_matches_mpi(detect_launch(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}})), 0, 1));
}

// The ranks on this node, from each launcher's own variable; 1 where it has none.
TEST(DistLaunch, LocalSizeFromEachLauncher) {
  EXPECT_EQ(detect_launch(env_of({})).local_size, 1);
  EXPECT_EQ(detect_launch(env_of({{"OMPI_COMM_WORLD_RANK", "5"},
                                  {"OMPI_COMM_WORLD_SIZE", "8"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}))
                .local_size,
            4);
  EXPECT_EQ(detect_launch(env_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}))
                .local_size,
            1);
  EXPECT_EQ(detect_launch(env_of({{"SLURM_PROCID", "6"},
                                  {"SLURM_STEP_NUM_TASKS", "7"},
                                  {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                                  {"SLURM_NODEID", "3"}}))
                .local_size,
            1);
  EXPECT_EQ(detect_launch(env_of({{"SLURM_PROCID", "0"},
                                  {"SLURM_STEP_NUM_TASKS", "7"},
                                  {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                                  {"SLURM_NODEID", "0"}}))
                .local_size,
            2);
  EXPECT_EQ(detect_launch(env_of({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}}))
                .local_size,
            2);
  EXPECT_NE(error_of([] {
              detect_launch(env_of({{"OMPI_COMM_WORLD_RANK", "0"},
                                    {"OMPI_COMM_WORLD_SIZE", "2"},
                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "0"}}));
            }).find("0 ranks on this node"),
            std::string::npos);
}

TEST(DistLaunch, SlurmTasksPerNodeList) {
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("1,3,2(x2)", 1), 3);
  EXPECT_EQ(slurm_tasks_on_node("1,3,2(x2)", 3), 2);
  for (const char* bad : {"", "x", "2(x3", "2(x0)", "2;1", "2,", "0", "-1", "2(3)"}) {
    EXPECT_NE(error_of([&] { slurm_tasks_on_node(bad, 0); }).find("is not srun's list"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(error_of([] { slurm_tasks_on_node("2(x3),1", 4); }).find("lists 4 nodes, not node 4"),
            std::string::npos);
}

TEST(DistLaunch, BadValuesNameTheVariable) {
  EXPECT_NE(error_of([] {
              detect_launch(env_of({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
            }).find("OMPI_COMM_WORLD_RANK='x'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              detect_launch(env_of({{"RANK", "1"}}));
            }).find("WORLD_SIZE"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              detect_launch(env_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}}));
            }).find("RANK=4 is outside [0, WORLD_SIZE=4)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              detect_launch(env_of({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "0"}}));
            }).find("SLURM_STEP_NUM_TASKS=0"),
            std::string::npos);
}

TEST(DistLaunch, MismatchWithMpiWorld) {
  const LaunchInfo info =
      detect_launch(env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  const std::string message = error_of([&] { check_launch_matches_mpi(info, 1, 4); });
  EXPECT_NE(message.find("MPI sees rank 1 of 4"), std::string::npos) << message;
}

TEST(DistLaunch, TimeoutFromEnvironment) {
  EXPECT_EQ(timeout_seconds_from_env(env_of({}), 300), 300);
  EXPECT_EQ(timeout_seconds_from_env(env_of({{"MDS_DIST_TIMEOUT_S", "2.5"}}), 300), 2.5);
  EXPECT_THROW(timeout_seconds_from_env(env_of({{"MDS_DIST_TIMEOUT_S", "0"}}), 300), base::Error);
  EXPECT_THROW(timeout_seconds_from_env(env_of({{"MDS_DIST_TIMEOUT_S", "2s"}}), 300), base::Error);
}

}  // namespace
}  // namespace mds::dist
