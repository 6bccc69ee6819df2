// Choosing the device communicators of a grid (--distributed-backend) on the host: the flag's
// values, the staged wrapping of every group (null groups stay null, host tensors still reach the
// host groups), and the one-line errors where NCCL cannot be had.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "base/error.h"

#include "dist/device_communicators.h"
#include "dist/host_staged_communicator.h"
#include "tensor/device_memory.h"
#include "test_support.h"
#include "thread_communicator.h"

namespace mds {
namespace {

using dist::DeviceBackend;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};

dist::GridCommunicators one_rank_grid(bool with_embedding) {
  auto mail = std::make_shared<test::Mailboxes>();
  auto group = [&](const char* name) {
    return std::make_unique<test::ThreadCommunicator>(name, mail, 0, 1);
  };
  dist::GridCommunicators grid;
  grid.tp = group("tp");
  grid.dp = group("dp");
  grid.pp = group("pp");
  grid.mp = group("mp");
  if (with_embedding) grid.embedding = group("embedding");
  return grid;
}

TEST(DeviceCommunicators, ParsesTheDistributedBackend) {
  EXPECT_EQ(dist::parse_device_backend("nccl"), DeviceBackend::kNccl);
  EXPECT_EQ(dist::parse_device_backend("gloo"), DeviceBackend::kHostStaged);
  EXPECT_EQ(testing_support::one_line_error([] { dist::parse_device_backend("mpi"); }),
            "--distributed-backend must be nccl or gloo, got 'mpi'");
}

TEST(DeviceCommunicators, GlooStagesEveryGroupAndKeepsAbsentOnesAbsent) {
  const dist::GridCommunicators grid = dist::device_grid_communicators(
      one_rank_grid(false), DeviceBackend::kHostStaged, kCuda0, 10.0);
  for (dist::GroupKind kind : {dist::GroupKind::kTensor, dist::GroupKind::kData,
                               dist::GroupKind::kPipeline, dist::GroupKind::kModel}) {
    const dist::Communicator* c = grid.get(kind);
    ASSERT_NE(c, nullptr);
    EXPECT_NE(dynamic_cast<const dist::HostStagedCommunicator*>(c), nullptr);
    EXPECT_EQ(c->name(), dist::group_name(kind));
  }
  EXPECT_EQ(grid.embedding, nullptr);
  std::vector<double> loss{2.5};
  grid.dp->all_reduce(Tensor(loss.data(), DType::kFloat64, Shape{1}));
  EXPECT_EQ(loss, std::vector<double>{2.5});
}

TEST(DeviceCommunicators, NeedACudaDevice) {
  EXPECT_EQ(testing_support::one_line_error([] {
              dist::device_grid_communicators(one_rank_grid(true), DeviceBackend::kHostStaged,
                                              tensor::Device{}, 10.0);
            }),
            "dist: device communicators need a CUDA device, got cpu");
}

TEST(DeviceCommunicators, GroupsOfOneRankNeedNoNccl) {
  const dist::GridCommunicators grid =
      dist::device_grid_communicators(one_rank_grid(true), DeviceBackend::kNccl, kCuda0, 10.0);
  for (dist::GroupKind kind :
       {dist::GroupKind::kTensor, dist::GroupKind::kData, dist::GroupKind::kPipeline,
        dist::GroupKind::kModel, dist::GroupKind::kEmbedding}) {
    EXPECT_NE(dynamic_cast<const dist::HostStagedCommunicator*>(grid.get(kind)), nullptr)
        << dist::group_name(kind);
  }
}

TEST(DeviceCommunicators, NcclWithoutCudaOrWithoutADeviceFailsWithOneLine) {
  if (tensor::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  // A two-rank data-parallel group (the other rank on a thread) needs NCCL.
  auto mail = std::make_shared<test::Mailboxes>();
  std::thread other([mail] {
    try {
      dist::GridCommunicators grid;
      grid.dp = std::make_unique<test::ThreadCommunicator>("dp", mail, 1, 2);
      dist::device_grid_communicators(std::move(grid), DeviceBackend::kNccl, kCuda0, 10.0);
    } catch (const base::Error&) {
    }
  });
  const std::string error = testing_support::one_line_error([&] {
    dist::GridCommunicators grid;
    grid.dp = std::make_unique<test::ThreadCommunicator>("dp", mail, 0, 2);
    dist::device_grid_communicators(std::move(grid), DeviceBackend::kNccl, kCuda0, 10.0);
  });
  other.join();
  if (!tensor::kCudaBuilt) {
    EXPECT_EQ(error,
              "--distributed-backend nccl: this build has no CUDA backend (BUILD_CUDA=OFF), so "
              "no NCCL; group 'dp' cannot move tensors on cuda:0");
  } else {
    // No device for cudaSetDevice (checked before libnccl.so.2 is even opened).
    EXPECT_NE(error.find("dist: NCCL communicator of group 'dp' (rank 0 of 2, cuda:0): "
                         "cudaSetDevice"),
              std::string::npos)
        << error;
  }
}

}  // namespace
}  // namespace mds
