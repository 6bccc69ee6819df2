// The SIMT emulation itself (tests/unit/simt_emulation.h): the launches a GPU refuses fail, the
// hangs of misplaced barriers are reported instead of hanging, unwritten shared memory reads NaN,
// shuffles and votes follow CUDA's rules for every type and width, and 3-dimensional blocks and
// grids cover every (block, thread) once.
#define MDS_SIMT_SHARED_ARRAYS
#include "tests/unit/simt_emulation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mds {
namespace {

using simt::Launch;

Launch launch_of(simt::Dim3 grid, simt::Dim3 block) {
  Launch l;
  l.grid = grid;
  l.block = block;
  return l;
}

// The message of the std::runtime_error `run` throws ("" when it does not throw).
template <typename Run>
std::string failure_of(Run run) {
  try {
    run();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

void nothing() {}

TEST(SimtEmulation, RefusesLaunchesAGpuRefuses) {
  EXPECT_NE(failure_of([] { simt::launch(launch_of({1}, {1025}), nothing); }).find("1024"),
            std::string::npos);
  EXPECT_NE(failure_of([] { simt::launch(launch_of({1}, {1, 1, 65}), nothing); }), "");
  EXPECT_NE(failure_of([] {
              simt::launch(launch_of({1, 65536}, {32}), nothing);
            }).find("65535"),
            std::string::npos);
  EXPECT_NE(failure_of([] { simt::launch(launch_of({1, 1, 65536}, {32}), nothing); }), "");
  EXPECT_NE(failure_of([] { simt::launch(launch_of({0}, {32}), nothing); }).find("empty"),
            std::string::npos);
  EXPECT_NE(failure_of([] { simt::launch(launch_of({1}, {0}), nothing); }), "");

  std::vector<std::byte> smem(300 * 1024);
  Launch l = launch_of({1}, {32});
  l.dynamic_shared = smem;
  l.dynamic_shared_bytes = 48 * 1024 + 4;  // over the default without the opt-in
  EXPECT_NE(failure_of([&] { simt::launch(l, nothing); }).find("opted into"), std::string::npos);
  l.max_dynamic_shared_bytes = 100 * 1024;
  l.dynamic_shared_bytes = 100 * 1024;
  EXPECT_EQ(failure_of([&] { simt::launch(l, nothing); }), "");
  l.max_dynamic_shared_bytes = l.dynamic_shared_bytes = 200 * 1024;  // sm_90 only
  EXPECT_NE(failure_of([&] { simt::launch(l, nothing); }).find("device allows"), std::string::npos);
  l.device_shared_bytes = simt::kMaxSharedBytesSm90;
  EXPECT_EQ(failure_of([&] { simt::launch(l, nothing); }), "");
  l.dynamic_shared = std::span<std::byte>(smem).first(1024);
  EXPECT_NE(failure_of([&] { simt::launch(l, nothing); }).find("extern __shared__"),
            std::string::npos);

  // The limits themselves are valid.
  EXPECT_EQ(failure_of([] { simt::launch(launch_of({1, 65535}, {1}), nothing); }), "");
  EXPECT_EQ(failure_of([] { simt::launch(launch_of({1}, {1024}), nothing); }), "");
}

// Threads below `writers` write their slot of a shared array, then every thread reads the slot
// of thread (t + 1) mod 64.
__global__ void read_neighbour_kernel(float* out, unsigned writers) {
  __shared__ float slots[64];
  if (threadIdx.x < writers) slots[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = slots[(threadIdx.x + 1) % 64];
}

TEST(SimtEmulation, SharedMemoryNoThreadWroteReadsNaNInEveryBlock) {
  std::vector<float> out(3 * 64, 0.0f);
  simt::launch(launch_of({3}, {64}), [&] { read_neighbour_kernel(out.data(), 64); });
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<float>((i + 1) % 64));
  // Block 1 writing what block 0 wrote is no excuse: the array is poisoned before every block.
  simt::launch(launch_of({3}, {64}), [&] { read_neighbour_kernel(out.data(), 32); });
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(std::isnan(out[i]), (i + 1) % 64 >= 32) << i;
  }
}

__global__ void early_return_kernel(float* out) {
  if (threadIdx.x >= 200) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void split_warp_kernel(float* out) {
  float v = static_cast<float>(threadIdx.x);
  if (threadIdx.x < 16) {
    v = __shfl_xor_sync(0xFFFFFFFFu, v, 1);
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = v;
}

TEST(SimtEmulation, ReportsBarriersThatWouldHangInsteadOfHanging) {
  std::vector<float> out(256);
  const std::string early = failure_of(
      [&] { simt::launch(launch_of({2}, {256}), [&] { early_return_kernel(out.data()); }); });
  EXPECT_NE(early.find("__syncthreads"), std::string::npos) << early;
  EXPECT_NE(early.find("returned"), std::string::npos) << early;
  const std::string split = failure_of(
      [&] { simt::launch(launch_of({1}, {64}), [&] { split_warp_kernel(out.data()); }); });
  EXPECT_NE(split.find("can complete"), std::string::npos) << split;
  // The emulation is usable again after a failed launch.
  simt::launch(launch_of({1}, {64}), [&] { read_neighbour_kernel(out.data(), 64); });
  EXPECT_EQ(out[0], 1.0f);
}

template <typename T>
__global__ void shuffles_kernel(T* out, int width) {
  const T v = static_cast<T>(threadIdx.x * 3 + 1);
  const unsigned t = threadIdx.x;
  out[4 * t + 0] = __shfl_xor_sync(0xFFFFFFFFu, v, 5, width);
  out[4 * t + 1] = __shfl_down_sync(0xFFFFFFFFu, v, 3, width);
  out[4 * t + 2] = __shfl_up_sync(0xFFFFFFFFu, v, 2, width);
  out[4 * t + 3] = __shfl_sync(0xFFFFFFFFu, v, 7, width);
}

template <typename T>
void check_shuffles(int width) {
  SCOPED_TRACE(testing::Message() << "width " << width << " size " << sizeof(T));
  std::vector<T> out(4 * 64);
  simt::launch(launch_of({1}, {64}), [&] { shuffles_kernel<T>(out.data(), width); });
  const auto value = [](unsigned lane) { return static_cast<T>(lane * 3 + 1); };
  const auto w = static_cast<unsigned>(width);
  for (unsigned t = 0; t < 64; ++t) {
    const unsigned warp = t / 32 * 32, lane = t % 32, group = lane / w * w;
    const unsigned x = lane ^ 5u;
    EXPECT_EQ(out[4 * t + 0], value(warp + (x >= group + w ? lane : x))) << t;
    EXPECT_EQ(out[4 * t + 1], value(warp + (lane + 3 >= group + w ? lane : lane + 3))) << t;
    EXPECT_EQ(out[4 * t + 2], value(warp + (lane < group + 2 ? lane : lane - 2))) << t;
    EXPECT_EQ(out[4 * t + 3], value(warp + group + 7 % w)) << t;
  }
}

TEST(SimtEmulation, ShufflesFollowCudaForEveryTypeAndWidth) {
  for (const int width : {32, 16, 8}) {
    check_shuffles<float>(width);
    check_shuffles<double>(width);
    check_shuffles<int>(width);
    check_shuffles<std::int64_t>(width);
  }
}

// 48 threads: a full warp, then one of 16 lanes, each shuffling with its own lanes' mask.
__global__ void partial_warp_kernel(float* out, int delta) {
  const unsigned mask = threadIdx.x < 32 ? 0xFFFFFFFFu : 0xFFFFu;
  out[threadIdx.x] = __shfl_xor_sync(mask, static_cast<float>(threadIdx.x), delta);
}

TEST(SimtEmulation, APartialLastWarpShufflesInsideItself) {
  std::vector<float> out(48);
  simt::launch(launch_of({1}, {48}), [&] { partial_warp_kernel(out.data(), 1); });
  EXPECT_EQ(out[33], 32.0f);
  EXPECT_EQ(out[47], 46.0f);
  // Lane 15 of the last warp (thread 47) reading lane 31: no such thread.
  EXPECT_NE(failure_of([&] {
              simt::launch(launch_of({1}, {48}), [&] { partial_warp_kernel(out.data(), 16); });
            }).find("past the end"),
            std::string::npos);
}

__global__ void votes_kernel(int* out, unsigned set) {
  const int p = threadIdx.x < set ? 1 : 0;
  const int any = __syncthreads_or(p), all = __syncthreads_and(p), count = __syncthreads_count(p);
  if (threadIdx.x == 0) {
    out[0] = any;
    out[1] = all;
    out[2] = count;
  }
}

TEST(SimtEmulation, BlockVotes) {
  std::vector<int> out(3);
  for (const unsigned set : {0u, 1u, 100u, 96u}) {
    simt::launch(launch_of({1}, {96}), [&] { votes_kernel(out.data(), set); });
    EXPECT_EQ(out, (std::vector<int>{set > 0, set >= 96, static_cast<int>(std::min(set, 96u))}));
  }
}

__global__ void coverage_kernel(int* hits) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  hits[block * blockDim.x * blockDim.y * blockDim.z + thread] += 1;
}

TEST(SimtEmulation, ThreeDimensionalGridsAndBlocksCoverEveryThreadOnce) {
  std::vector<int> hits(3 * 2 * 2 * 4 * 3 * 5, 0);
  simt::launch(launch_of({3, 2, 2}, {4, 3, 5}), [&] { coverage_kernel(hits.data()); });
  EXPECT_EQ(hits, std::vector<int>(hits.size(), 1));
}

}  // namespace
}  // namespace mds
