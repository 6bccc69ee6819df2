// Runs CUDA kernel code on the CPU, for the kernels whose device code lives in headers with no
// CUDA includes (kernels/*_kernels.cuh): the CUDA keywords become nothing, every CUDA thread of a
// block is a fiber (simt_fibers.h: its own stack, all on the calling thread), __syncthreads is a
// barrier of the block and a warp shuffle an exchange between two barriers of the warp. Between
// two barriers the threads run one after the other, in a shuffled order (different at every
// barrier and launch) in half the blocks and depth first in the others (a warp runs ahead through
// its shuffles), and blocks run one at a time in a shuffled order: a kernel whose result depends
// on the order (a missing barrier before a read or before an overwrite of shared memory, a race
// between blocks) gives wrong or different bits on a rerun, or reads poison. Enough to check a
// kernel's indexing, masking, tiling, launch shape and barrier placement on a machine without a
// GPU; nothing about its speed, and the arithmetic is the host's (no FMA contraction with
// -std=c++20, as the kernels' --fmad=false; the transcendentals are glibc's, not CUDA's).
//
// Usage: include this first, then the kernel header, then call simt::launch with the kernel's
// launch shape and a body calling the kernel. Fails loudly (launch throws std::runtime_error, the
// test fails with the message) on what a first run on a GPU would hit:
//  - a launch a GPU refuses: more than 1024 threads per block (or x, y > 1024, z > 64), an empty
//    grid or block, grid.x > 2^31 − 1 or grid.y, grid.z > 65535, dynamic shared memory over
//    48 KiB without the kernel's cudaFuncSetAttribute opt-in or over what sm_80 allows (163 KiB;
//    sm_90: 227 KiB);
//  - __syncthreads (or a shuffle, __syncwarp) reached after some threads of the block (warp)
//    returned, or a thread returning while others wait there; threads of a block waiting at
//    different barriers (a hang on a GPU);
//  - a shuffle whose mask is not the whole warp, or that reads a lane past the block's end.
// Shared memory no thread of the block wrote reads as NaN (0xFF bytes: NaN in fp32, fp64, bf16
// and fp16; −1 as an integer): fixed `__shared__` arrays are poisoned before every block (with
// MDS_SIMT_SHARED_ARRAYS, below), and so is the `extern __shared__` array a launch names.
//
// Shared memory, two modes, because C++ has no specifier that makes a block-scope variable static
// and may also follow `extern`:
//  - default: `__shared__` is nothing. `extern __shared__ T smem[]` (dynamic shared memory) then
//    names an array the test defines in the kernel's namespace (`namespace X { float
//    smem[simt::kSharedFloats]; }`, before the kernel header); fixed arrays must be spelled
//    `static __shared__` (legal CUDA, same meaning) and are not poisoned.
//  - `#define MDS_SIMT_SHARED_ARRAYS` before including this: `__shared__ T x[N];` inside a kernel
//    becomes a static placed in the section mds_simt_shared, one copy for all threads (blocks run
//    one at a time, so one copy is the block's shared memory) and 0xFF-filled before every block.
//    `extern __shared__` does not compile in this mode.
//
// What it cannot emulate faithfully (so cannot check): the speed and occupancy; registers and
// __launch_bounds__ (a block larger than the bounds fails on a GPU, not here); blocks running
// concurrently, and the memory model beyond barriers (threads switch only at barriers, so a race
// between two threads inside one barrier interval shows only through the shuffled order); lanes
// of a warp diverging between shuffles; the device's transcendentals (expf, tanhf, erff, logf:
// host glibc; fast intrinsics such as __expf or rsqrtf are not defined here, so a kernel using
// them does not compile); atomics other than atomicAdd (exact here, as blocks never run at once,
// so the fences of a last-block pattern go unchecked); shuffles with partial masks; bank conflicts;
// reads of global memory out of bounds (the tests surround their buffers with poisoned guards
// instead, tests/unit/guarded_buffer.h).
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tests/unit/simt_fibers.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#if defined(MDS_SIMT_SHARED_ARRAYS)
#define __shared__ static __attribute__((section("mds_simt_shared")))
#define MDS_SIMT_SHARED_ARRAYS_ON  // the mode this header was first included in
#else
#define __shared__
#endif

// The bounds of section mds_simt_shared (the linker defines them when the section exists; weak, so
// a program without fixed shared arrays links too).
extern "C" __attribute__((weak)) char __start_mds_simt_shared[];
extern "C" __attribute__((weak)) char __stop_mds_simt_shared[];

namespace mds::simt {

constexpr unsigned kBlockThreads = 256;  // the block of the two-dimensional launch() below
constexpr unsigned kWarpSize = 32;
constexpr std::size_t kSharedFloats = 1 << 16;  // 256 KiB, more than any GPU gives a block

// Limits of the GPUs the kernels are built for (sm_80, sm_90).
constexpr unsigned kMaxBlockThreads = 1024;
constexpr unsigned kMaxBlockXY = 1024, kMaxBlockZ = 64;
constexpr std::uint64_t kMaxGridX = 0x7FFFFFFF, kMaxGridYZ = 65535;
constexpr std::size_t kDefaultSharedBytes = 48 * 1024;  // without cudaFuncSetAttribute
constexpr std::size_t kMaxSharedBytesSm80 = 163 * 1024, kMaxSharedBytesSm90 = 227 * 1024;

struct Index {
  unsigned x = 0, y = 0, z = 0;
};

// The running thread's index (switched with the fiber) and the launch's.
inline Index thread_index;
inline unsigned thread_rank = 0;  // x + y·block.x + z·block.x·block.y
inline Index block_index, grid_size, block_size;

// Thrown inside the threads of a block once its launch has failed, to unwind their stacks.
struct Aborted {};

// The parts streamed into one string (messages; gcc 12 warns falsely on chains of string +).
template <typename... Parts>
std::string text(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

struct BlockState;

// A barrier of some threads of a block (all of them for __syncthreads, one warp for shuffles).
// Plain arrays on the hot paths: the sanitizer build runs them unoptimized.
class Barrier {
 public:
  Barrier(BlockState& owner, unsigned members, const char* what)
      : owner_(owner),
        members_(members),
        waiting_storage_(new unsigned[members]),
        waiting_(waiting_storage_.get()),
        what_(what) {}
  // Suspends the calling thread until every member arrived; throws Aborted once the launch failed.
  void arrive_and_wait();

 private:
  friend struct BlockState;
  BlockState& owner_;
  const unsigned members_;
  unsigned exited_ = 0;  // members that returned from the kernel
  std::unique_ptr<unsigned[]> waiting_storage_;
  unsigned* waiting_;
  unsigned waiting_count_ = 0;
  const char* what_;
};

// The block being run: one fiber per thread, handing control to each other at barriers (in a
// shuffled or a depth-first order, see switch_to_next), the barriers, the words shuffles and votes
// exchange, and the first error.
struct BlockState {
  enum class Run { kRunnable, kWaiting, kDone };
  struct Thread {
    fiber::Stack* stack = nullptr;
    fiber::Context context;
    Index index;
    Run run = Run::kDone;
  };

  BlockState(unsigned block_threads, Index block_shape, std::uint64_t seed)
      : threads(block_threads),
        pool_storage(new Thread[block_threads]),
        runnable_storage(new unsigned[block_threads]),
        warp_of_storage(new Barrier*[(block_threads + kWarpSize - 1) / kWarpSize]),
        pool(pool_storage.get()),
        runnable(runnable_storage.get()),
        warp_of(warp_of_storage.get()),
        rng(seed),
        block(*this, block_threads, "__syncthreads") {
    // Stacks outlive launches: mapping and first touching 256 of them per launch would cost more
    // than most kernels take to run.
    static std::vector<std::unique_ptr<fiber::Stack>> stacks;
    while (stacks.size() < threads) stacks.push_back(std::make_unique<fiber::Stack>());
    for (unsigned t = 0; t < threads; ++t) {
      pool[t].stack = stacks[t].get();
      pool[t].index = {t % block_shape.x, t / block_shape.x % block_shape.y,
                       t / (block_shape.x * block_shape.y)};
    }
    for (unsigned first = 0; first < threads; first += kWarpSize) {
      warps.push_back(
          std::make_unique<Barrier>(*this, std::min(kWarpSize, threads - first), "a warp barrier"));
      warp_of[first / kWarpSize] = warps.back().get();
    }
  }

  // Runs `body` on every thread of the current block until all returned (or the launch failed and
  // every thread unwound).
  void run_block(const std::function<void()>& block_body) {
    body = &block_body;
    for (Barrier* b : all_barriers()) b->exited_ = b->waiting_count_ = 0;
    depth_first = (random() & 1) != 0;
    for (unsigned t = 0; t < threads; ++t) {
      fiber::prepare(pool[t].context, *pool[t].stack, &thread_main, this);
      pool[t].run = Run::kRunnable;
      runnable[t] = t;
    }
    runnable_count = threads;
    // Threads hand control to each other (switch_to_next); it comes back here only when none is
    // runnable: every thread returned, or the rest wait at barriers that cannot complete.
    for (;;) {
      if (runnable_count == 0) {
        bool stuck = false;
        for (unsigned t = 0; t < threads; ++t) stuck = stuck || pool[t].run != Run::kDone;
        if (!stuck) return;
        fail(
            "every thread of the block that has not returned waits at a barrier none of them can "
            "complete (threads at different __syncthreads or shuffles: a hang on a GPU)");
        continue;  // fail() made the waiting threads runnable, to unwind
      }
      switch_to_next(scheduler);
    }
  }

  // splitmix64: cheap, and enough for a shuffle.
  std::uint64_t random() {
    rng += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = rng;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Resumes the next runnable thread, or the scheduler when there is none. `leaving`: `from` is a
  // thread that returned for good. Half the blocks pick at random (the order within a barrier
  // interval is a shuffle); the other half depth first, the thread made runnable last: a warp
  // then runs through its shuffles ahead of the others, which shows a missing __syncthreads
  // between one phase's reads of shared memory and the next phase's writes.
  void switch_to_next(fiber::Context& from, bool leaving = false) {
    if (runnable_count == 0) return fiber::switch_to(from, scheduler, leaving);
    const unsigned pick = depth_first
                              ? runnable_count - 1
                              : static_cast<unsigned>(((random() >> 32) * runnable_count) >> 32);
    const unsigned t = runnable[pick];
    runnable[pick] = runnable[--runnable_count];
    current = t;
    thread_rank = t;
    thread_index = pool[t].index;
    // The suspending thread itself may be the pick: it just goes on (a switch to the context
    // being saved would resume where it was last suspended).
    if (&from != &pool[t].context) fiber::switch_to(from, pool[t].context, leaving);
  }

  // The fiber of a thread: the kernel, then the thread's exit, then back for good.
  static void thread_main(void* self) {
    auto& state = *static_cast<BlockState*>(self);
    fiber::started(state.scheduler);
    try {
      (*state.body)();
    } catch (const Aborted&) {
    } catch (const std::exception& e) {
      state.fail(text("exception in thread ", state.current, ": ", e.what()));
    } catch (...) {
      state.fail(text("exception in thread ", state.current));
    }
    state.thread_exit();
    Thread& thread = state.pool[state.current];
    thread.run = Run::kDone;
    state.switch_to_next(thread.context, /*leaving=*/true);
  }

  // Suspends the current thread until it is picked again (kRunnable: it joins the runnable
  // ones; kWaiting: a barrier releases it first).
  void suspend(Run run) {
    const unsigned self = current;
    pool[self].run = run;
    if (run == Run::kRunnable) runnable[runnable_count++] = self;
    switch_to_next(pool[self].context);
  }

  void release(unsigned t) {
    pool[t].run = Run::kRunnable;
    runnable[runnable_count++] = t;
  }

  // Records the first error and makes every waiting thread runnable (it throws Aborted on resume).
  void fail(const std::string& message) {
    if (!failed) error = message;
    failed = true;
    for (Barrier* b : all_barriers()) {
      for (unsigned w = 0; w < b->waiting_count_; ++w) release(b->waiting_[w]);
      b->waiting_count_ = 0;
    }
  }

  // From the running thread: fails the launch and unwinds this thread.
  [[noreturn]] void fail_here(const std::string& message) {
    fail(text(message, " (thread ", current, ")"));
    throw Aborted{};
  }

  // The running thread returned from the kernel: its barriers can no longer complete.
  void thread_exit() {
    if (failed) return;
    for (Barrier* b : {&block, warp_of[current / kWarpSize]}) {
      ++b->exited_;
      if (b->waiting_count_ > 0) {
        return fail(text("thread ", current, " returned while ", b->waiting_count_,
                         " threads wait at ", b->what_,
                         " (undefined in CUDA: a hang or garbage on a GPU)"));
      }
    }
  }

  std::vector<Barrier*> all_barriers() {
    std::vector<Barrier*> all{&block};
    for (auto& warp : warps) all.push_back(warp.get());
    return all;
  }

  const unsigned threads;
  std::unique_ptr<Thread[]> pool_storage;
  std::unique_ptr<unsigned[]> runnable_storage;
  std::unique_ptr<Barrier*[]> warp_of_storage;
  // Raw views of the three for the hot paths (the sanitizer build runs them unoptimized).
  Thread* pool;
  unsigned* runnable;
  Barrier** warp_of;  // warps[w].get()
  unsigned runnable_count = 0;
  fiber::Context scheduler;
  unsigned current = 0;
  const std::function<void()>* body = nullptr;
  std::uint64_t rng;  // splitmix64 state
  bool depth_first = false;
  bool failed = false;
  std::string error;
  Barrier block;
  std::vector<std::unique_ptr<Barrier>> warps;
  float exchange[kMaxBlockThreads] = {};       // kept for float-only exchanges
  std::uint64_t words[kMaxBlockThreads] = {};  // a shuffled value of up to 8 bytes per thread
  std::uint8_t votes[kMaxBlockThreads] = {};   // __syncthreads_or / _and / _count
};

inline void Barrier::arrive_and_wait() {
  if (owner_.failed) throw Aborted{};
  if (exited_ > 0) {
    owner_.fail_here(text(what_, " reached after ", exited_,
                          " of its threads returned (undefined in CUDA: a hang or garbage on a "
                          "GPU)"));
  }
  if (waiting_count_ + 1 == members_) {
    for (unsigned w = 0; w < waiting_count_; ++w) owner_.release(waiting_[w]);
    waiting_count_ = 0;
    owner_.suspend(BlockState::Run::kRunnable);  // the released and this one, in shuffled order
  } else {
    waiting_[waiting_count_++] = owner_.current;
    owner_.suspend(BlockState::Run::kWaiting);
  }
  if (owner_.failed) throw Aborted{};
}

inline BlockState* state = nullptr;

inline void syncthreads() {
  state->block.arrive_and_wait();
}

// __syncthreads_or / _and / _count: a barrier that also combines one predicate per thread.
inline int syncthreads_count(int predicate) {
  state->votes[thread_rank] = predicate != 0 ? 1 : 0;
  state->block.arrive_and_wait();
  int count = 0;
  for (unsigned t = 0; t < state->threads; ++t) count += state->votes[t];
  state->block.arrive_and_wait();  // nobody votes again before everyone has counted
  return count;
}
inline int syncthreads_or(int predicate) {
  return syncthreads_count(predicate) > 0 ? 1 : 0;
}
inline int syncthreads_and(int predicate) {
  return syncthreads_count(predicate) == static_cast<int>(state->threads) ? 1 : 0;
}

// The lanes of this thread's warp: 32, or fewer in the last warp of a block that is not a
// multiple of 32.
inline unsigned warp_lanes() {
  const unsigned left = state->threads - thread_rank / kWarpSize * kWarpSize;
  return left < kWarpSize ? left : kWarpSize;
}

// Only full-warp masks are emulated (every lane of the warp calls, as the kernels here do).
inline void check_full_mask(unsigned mask, const char* what) {
  const unsigned lanes = warp_lanes();
  const unsigned full = lanes == kWarpSize ? 0xFFFFFFFFu : (1u << lanes) - 1u;
  if (mask != full) {
    state->fail_here(text(what, " with mask ", mask, ": only the whole warp's mask is emulated"));
  }
}

inline void syncwarp(unsigned mask = 0xFFFFFFFFu) {
  check_full_mask(mask, "__syncwarp");
  state->warp_of[thread_rank / kWarpSize]->arrive_and_wait();
}

// Every lane of the warp publishes `value`, then reads the value of lane source(lane) (its own
// when source returns the lane itself), as the __shfl*_sync intrinsics with a full mask.
template <typename T, typename Source>
T warp_exchange(unsigned mask, T value, const char* what, Source source) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(std::uint64_t),
                "shuffles move values of up to 8 bytes");
  check_full_mask(mask, what);
  const unsigned warp = thread_rank / kWarpSize, lane = thread_rank % kWarpSize;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  state->words[thread_rank] = bits;
  Barrier* const warp_barrier = state->warp_of[warp];
  warp_barrier->arrive_and_wait();
  const unsigned from = source(lane);
  if (from >= warp_lanes()) {
    state->fail_here(text(what, " reads lane ", from, ", past the end of the block"));
  }
  bits = state->words[warp * kWarpSize + from];
  warp_barrier->arrive_and_wait();  // nobody overwrites a word before every lane read it
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

inline void check_width(int width, const char* what) {
  if (width <= 0 || width > static_cast<int>(kWarpSize) || (width & (width - 1)) != 0) {
    state->fail_here(text(what, " with width ", width, ": not a power of two up to 32"));
  }
}

// CUDA's rules for width < 32: lanes form groups of `width`; xor may read earlier groups, a read
// past the lane's group gives the lane's own value; down and up stay inside the group; idx wraps
// the source lane inside the group.
template <typename T>
T shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = kWarpSize) {
  check_width(width, "__shfl_xor_sync");
  return warp_exchange(mask, value, "__shfl_xor_sync", [&](unsigned lane) {
    const unsigned from = lane ^ static_cast<unsigned>(lane_mask);
    const unsigned group_end = (lane / unsigned(width) + 1) * unsigned(width);
    return from >= group_end ? lane : from;
  });
}

template <typename T>
T shfl_down_sync(unsigned mask, T value, unsigned delta, int width = kWarpSize) {
  check_width(width, "__shfl_down_sync");
  return warp_exchange(mask, value, "__shfl_down_sync", [&](unsigned lane) {
    const unsigned group_end = (lane / unsigned(width) + 1) * unsigned(width);
    return lane + delta >= group_end ? lane : lane + delta;
  });
}

template <typename T>
T shfl_up_sync(unsigned mask, T value, unsigned delta, int width = kWarpSize) {
  check_width(width, "__shfl_up_sync");
  return warp_exchange(mask, value, "__shfl_up_sync", [&](unsigned lane) {
    const unsigned group_start = lane / unsigned(width) * unsigned(width);
    return lane < group_start + delta ? lane : lane - delta;
  });
}

template <typename T>
T shfl_sync(unsigned mask, T value, int source_lane, int width = kWarpSize) {
  check_width(width, "__shfl_sync");
  return warp_exchange(mask, value, "__shfl_sync", [&](unsigned lane) {
    return lane / unsigned(width) * unsigned(width) + unsigned(source_lane) % unsigned(width);
  });
}

// The float-only form the attention tests were written against.
inline float shfl_xor(float value, int delta) {
  return shfl_xor_sync(0xFFFFFFFFu, value, delta);
}

// The high 32 bits of a 32 × 32-bit product (Philox's rounds).
inline std::uint32_t umulhi(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::uint32_t>((std::uint64_t{a} * b) >> 32);
}

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

enum class BlockOrder { kInOrder, kScrambled };

struct Launch {
  Dim3 grid, block;
  std::size_t dynamic_shared_bytes = 0;
  // The kernel's cudaFuncAttributeMaxDynamicSharedMemorySize: 48 KiB unless the launch code
  // opts in with cudaFuncSetAttribute.
  std::size_t max_dynamic_shared_bytes = kDefaultSharedBytes;
  // The most the device allows a block (sm_80's by default: the kernels must run there too).
  std::size_t device_shared_bytes = kMaxSharedBytesSm80;
  // The test's array behind `extern __shared__` (default mode): must hold dynamic_shared_bytes,
  // and is 0xFF-filled before every block.
  std::span<std::byte> dynamic_shared = {};
  BlockOrder order = BlockOrder::kScrambled;
};

// What cudaLaunchKernel would refuse, as one line; empty when the launch is valid.
inline std::string launch_error(const Launch& l) {
  const auto dims = [](const Dim3& d) { return text("(", d.x, ", ", d.y, ", ", d.z, ")"); };
  const std::uint64_t threads = std::uint64_t{l.block.x} * l.block.y * l.block.z;
  if (threads == 0 || l.grid.x == 0 || l.grid.y == 0 || l.grid.z == 0) {
    return text("empty grid ", dims(l.grid), " or block ", dims(l.block),
                " (cudaErrorInvalidConfiguration)");
  }
  if (threads > kMaxBlockThreads || l.block.x > kMaxBlockXY || l.block.y > kMaxBlockXY ||
      l.block.z > kMaxBlockZ) {
    return text("block ", dims(l.block), " of ", threads,
                " threads: at most 1024 threads, x and y ≤ 1024, z ≤ 64"
                " (cudaErrorInvalidConfiguration)");
  }
  if (l.grid.x > kMaxGridX || l.grid.y > kMaxGridYZ || l.grid.z > kMaxGridYZ) {
    return text("grid ", dims(l.grid),
                ": x ≤ 2^31 − 1, y and z ≤ 65535 (cudaErrorInvalidConfiguration)");
  }
  if (l.dynamic_shared_bytes > l.device_shared_bytes) {
    return text(l.dynamic_shared_bytes, " bytes of dynamic shared memory, more than the ",
                l.device_shared_bytes, " the device allows a block");
  }
  if (l.dynamic_shared_bytes > l.max_dynamic_shared_bytes) {
    return text(l.dynamic_shared_bytes, " bytes of dynamic shared memory, over the ",
                l.max_dynamic_shared_bytes,
                " the kernel was opted into (cudaFuncSetAttribute MaxDynamicSharedMemorySize)");
  }
  if (l.dynamic_shared_bytes > 0 && l.dynamic_shared.size() < l.dynamic_shared_bytes) {
    return text("the test's extern __shared__ array holds ", l.dynamic_shared.size(),
                " bytes, the launch asks for ", l.dynamic_shared_bytes);
  }
  return {};
}

// Fills every fixed __shared__ array (MDS_SIMT_SHARED_ARRAYS) with 0xFF bytes.
inline void poison_shared_arrays() {
  if (__start_mds_simt_shared != nullptr && __stop_mds_simt_shared != nullptr) {
    std::memset(__start_mds_simt_shared, 0xFF,
                static_cast<std::size_t>(__stop_mds_simt_shared - __start_mds_simt_shared));
  }
}

// The order blocks run in: in order, or shuffled by `seed`.
inline std::vector<std::uint64_t> block_order(std::uint64_t blocks, BlockOrder order,
                                              std::uint64_t seed) {
  std::vector<std::uint64_t> sequence(blocks);
  std::iota(sequence.begin(), sequence.end(), std::uint64_t{0});
  if (order == BlockOrder::kScrambled) {
    std::mt19937_64 rng(seed);
    std::shuffle(sequence.begin(), sequence.end(), rng);
  }
  return sequence;
}

// A different seed for every launch of the process, so that reruns shuffle differently.
inline std::uint64_t next_launch_seed() {
  static std::uint64_t launches = 0;
  return 0x9E3779B97F4A7C15ull * ++launches;
}

// Runs `body` (a call of the kernel) for every block of the launch, each block a set of
// block.x·block.y·block.z fibers; `before_block` runs before each block. Throws
// std::runtime_error on an invalid launch or a failure inside a block.
inline void launch(const Launch& config, const std::function<void()>& body,
                   const std::function<void()>& before_block = nullptr) {
  if (const std::string error = launch_error(config); !error.empty()) {
    throw std::runtime_error(text("simt: invalid launch: ", error));
  }
  if (state != nullptr) throw std::runtime_error("simt: a launch inside a launch");
  const Dim3 block = config.block;
  const std::uint64_t seed = next_launch_seed();
  BlockState block_state(block.x * block.y * block.z, {block.x, block.y, block.z}, seed);
  state = &block_state;
  grid_size = {config.grid.x, config.grid.y, config.grid.z};
  block_size = {block.x, block.y, block.z};
  std::string failure;
  const std::uint64_t gx = config.grid.x, gy = config.grid.y;
  for (const std::uint64_t b : block_order(gx * gy * config.grid.z, config.order, seed + 1)) {
    block_index = {static_cast<unsigned>(b % gx), static_cast<unsigned>(b / gx % gy),
                   static_cast<unsigned>(b / (gx * gy))};
    poison_shared_arrays();
    if (config.dynamic_shared_bytes > 0) {
      std::memset(config.dynamic_shared.data(), 0xFF, config.dynamic_shared.size());
    }
    if (before_block) before_block();
    block_state.run_block(body);
    if (block_state.failed) {
      failure = text(block_state.error, " in block (", block_index.x, ", ", block_index.y, ", ",
                     block_index.z, ")");
      break;
    }
  }
  state = nullptr;
  if (!failure.empty()) throw std::runtime_error(text("simt: ", failure));
}

// The forms the attention tests use: a grid_x × grid_y grid of blocks of `block_threads` threads
// (kBlockThreads by default), in order.
inline void launch(unsigned grid_x, unsigned grid_y, unsigned block_threads,
                   const std::function<void()>& body, const std::function<void()>& before_block) {
  Launch config;
  config.grid = {grid_x, grid_y, 1};
  config.block = {block_threads, 1, 1};
  config.order = BlockOrder::kInOrder;
  launch(config, body, before_block);
}

inline void launch(unsigned grid_x, unsigned grid_y, const std::function<void()>& body,
                   const std::function<void()>& before_block) {
  launch(grid_x, grid_y, kBlockThreads, body, before_block);
}

// atomicAdd: blocks run one after another and a block's threads only yield at barriers and
// shuffles, so a plain read-modify-write is atomic here.
template <typename T>
T atomic_add(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}

inline unsigned float_as_uint(float x) {
  return std::bit_cast<unsigned>(x);
}
inline float uint_as_float(unsigned x) {
  return std::bit_cast<float>(x);
}
inline int float_as_int(float x) {
  return std::bit_cast<int>(x);
}
inline float int_as_float(int x) {
  return std::bit_cast<float>(x);
}
inline long long double_as_longlong(double x) {
  return std::bit_cast<long long>(x);
}
inline double longlong_as_double(long long x) {
  return std::bit_cast<double>(x);
}

}  // namespace mds::simt

#define threadIdx (::mds::simt::thread_index)
#define blockIdx (::mds::simt::block_index)
#define gridDim (::mds::simt::grid_size)
#define blockDim (::mds::simt::block_size)
#define warpSize (static_cast<int>(::mds::simt::kWarpSize))
#define __syncthreads() ::mds::simt::syncthreads()
#define __syncthreads_or(predicate) ::mds::simt::syncthreads_or(predicate)
#define __syncthreads_and(predicate) ::mds::simt::syncthreads_and(predicate)
#define __syncthreads_count(predicate) ::mds::simt::syncthreads_count(predicate)
#define __syncwarp(...) ::mds::simt::syncwarp(__VA_ARGS__)
#define __shfl_xor_sync(...) ::mds::simt::shfl_xor_sync(__VA_ARGS__)
#define __shfl_down_sync(...) ::mds::simt::shfl_down_sync(__VA_ARGS__)
#define __shfl_up_sync(...) ::mds::simt::shfl_up_sync(__VA_ARGS__)
#define __shfl_sync(...) ::mds::simt::shfl_sync(__VA_ARGS__)
#define __umulhi(a, b) ::mds::simt::umulhi(a, b)
#define __float_as_uint(x) ::mds::simt::float_as_uint(x)
#define __uint_as_float(x) ::mds::simt::uint_as_float(x)
#define __float_as_int(x) ::mds::simt::float_as_int(x)
#define __int_as_float(x) ::mds::simt::int_as_float(x)
#define __double_as_longlong(x) ::mds::simt::double_as_longlong(x)
#define __longlong_as_double(x) ::mds::simt::longlong_as_double(x)
// IEEE round-to-nearest arithmetic: the host's operators.
#define __fadd_rn(a, b) ((a) + (b))
#define __fsub_rn(a, b) ((a) - (b))
#define __fmul_rn(a, b) ((a) * (b))
#define __fdiv_rn(a, b) ((a) / (b))
#define __ldg(pointer) (*(pointer))
#define __ldcg(pointer) (*(pointer))
#define __threadfence() ((void)0)
#define atomicAdd(address, value) ::mds::simt::atomic_add(address, value)
