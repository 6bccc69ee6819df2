// Runs CUDA kernel code on the CPU, for the kernels whose device code lives in a header with no
// CUDA includes (kernels/attention_kernels.cuh): the CUDA keywords become nothing, a block is
// kBlockThreads std::threads sharing one static shared-memory array, __syncthreads is a barrier of
// the block and a warp shuffle is an exchange between two barriers of the warp. Blocks run one
// after the other. Enough to check a kernel's indexing, masking, tiling and barrier placement on
// a machine without a GPU; nothing about its speed, and the arithmetic is the host's (no FMA
// contraction with -std=c++20, as the kernels' --fmad=false).
//
// Include this first, then define the kernel namespace's shared array
// (`namespace X { float smem[kSimtSharedFloats]; }`), then the kernel header.
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __shared__
#define __launch_bounds__(threads)

namespace mds::simt {

constexpr unsigned kBlockThreads = 256;
constexpr unsigned kWarpSize = 32;
constexpr std::size_t kSharedFloats = 1 << 16;  // 256 KiB, more than any GPU gives a block

struct Index {
  unsigned x = 0, y = 0, z = 0;
};

inline thread_local Index thread_index;
inline Index block_index, grid_size;

// A block of `threads` threads (a multiple of the warp size, at most kBlockThreads).
struct BlockState {
  std::barrier<> block;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  float exchange[kBlockThreads];
  explicit BlockState(unsigned threads = kBlockThreads) : block(threads) {
    for (unsigned w = 0; w < threads / kWarpSize; ++w) {
      warps.push_back(std::make_unique<std::barrier<>>(kWarpSize));
    }
  }
};
inline BlockState* state = nullptr;

inline void syncthreads() {
  state->block.arrive_and_wait();
}

// Every lane of the warp must call it, as with a full mask on a GPU (otherwise: a hang).
inline float shfl_xor(float value, int delta) {
  const unsigned t = thread_index.x, warp = t / kWarpSize;
  state->exchange[t] = value;
  state->warps[warp]->arrive_and_wait();
  const float other = state->exchange[warp * kWarpSize + ((t % kWarpSize) ^ unsigned(delta))];
  state->warps[warp]->arrive_and_wait();
  return other;
}

// The high 32 bits of a 32 × 32-bit product (Philox's rounds).
inline std::uint32_t umulhi(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::uint32_t>((std::uint64_t{a} * b) >> 32);
}

// Runs `body` (a call of the kernel) for every block of a grid.x × grid.y grid with
// `block_threads` threads each (a multiple of 32, at most kBlockThreads); `before_block` runs on
// the calling thread before each block (e.g. to poison the shared array with NaN, so that reading
// what no thread of the block wrote shows).
inline void launch(unsigned grid_x, unsigned grid_y, unsigned block_threads,
                   const std::function<void()>& body, const std::function<void()>& before_block) {
  BlockState block_state(block_threads);
  state = &block_state;
  grid_size = {grid_x, grid_y, 1};
  std::barrier<> start(block_threads + 1), done(block_threads + 1);
  std::atomic<bool> quit{false};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < block_threads; ++t) {
    pool.emplace_back([&, t] {
      thread_index = {t, 0, 0};
      for (;;) {
        start.arrive_and_wait();
        if (quit.load()) return;
        body();
        done.arrive_and_wait();
      }
    });
  }
  for (unsigned y = 0; y < grid_y; ++y) {
    for (unsigned x = 0; x < grid_x; ++x) {
      block_index = {x, y, 0};
      before_block();
      start.arrive_and_wait();
      done.arrive_and_wait();
    }
  }
  quit.store(true);
  start.arrive_and_wait();
  for (std::thread& thread : pool) thread.join();
  state = nullptr;
}

// Blocks of kBlockThreads threads.
inline void launch(unsigned grid_x, unsigned grid_y, const std::function<void()>& body,
                   const std::function<void()>& before_block) {
  launch(grid_x, grid_y, kBlockThreads, body, before_block);
}

}  // namespace mds::simt

#define threadIdx (::mds::simt::thread_index)
#define blockIdx (::mds::simt::block_index)
#define gridDim (::mds::simt::grid_size)
#define __syncthreads() ::mds::simt::syncthreads()
#define __shfl_xor_sync(mask, value, delta) ::mds::simt::shfl_xor(value, delta)
#define __umulhi(a, b) ::mds::simt::umulhi(a, b)
