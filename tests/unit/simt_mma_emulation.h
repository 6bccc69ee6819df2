// The tensor-core primitives of kernels/mma.cuh on the CPU, for kernels run under the SIMT
// emulation (simt_emulation.h): mma.sync m16n8k16 and ldmatrix as warp-collective operations
// (every lane publishes its registers, the warp meets at its barrier, each lane computes its own
// result from all 32), cp.async as deferred copies, the 16-bit conversions as tensor/dtype.h's.
//
// The fragment layouts below are transcribed from the PTX ISA ("Matrix Fragments for
// mma.m16n8k16 with floating point type", "ldmatrix"), in the ISA's own terms (groupID,
// threadID_in_group, element i of a fragment), not from the kernels that use them: a kernel that
// misreads the layouts computes the wrong product here and fails its test.
//
// Arithmetic: the products of 16-bit values are exact in fp32; each output is c + Σ_k a_k·b_k
// summed in fp32 in k order. Hardware sums the 16 products in another order and precision (the
// tests bound fp32 accumulation differences, they never rely on this order).
//
// cp.async: by default a copy lands when the issuing thread's cp_async_wait covers its group (the
// latest moment the PTX allows), so reading a tile before waiting for it reads stale data;
// `cp_async_immediate` makes copies land at issue (the earliest), so overwriting a buffer that
// another warp still reads shows too. ldmatrix rows and cp.async destinations must be 16-byte
// aligned and, when `shared_window` is set, inside it; a violation aborts with a message.
//
// Include this first (it includes simt_emulation.h), then define the kernels' shared array, then
// the kernel header.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <type_traits>
#include <vector>

#include "tensor/dtype.h"
#include "tests/unit/simt_emulation.h"

// The one keyword the tensor-core kernels use beyond those simt_emulation.h maps: the alignment of
// the extern shared array (which the test's definition of that array gives instead).
#define __align__(n)

#include "kernels/mma.cuh"

namespace mds::simt::mma_emulation {

// What a lane contributes to one warp-collective operation: its operand registers (mma) or the
// 16 bytes of the row it addresses (ldmatrix, read before the exchange so that no lane's later
// store can race with another lane's read).
struct LaneContribution {
  std::uint32_t a[4] = {};
  std::uint32_t b[2] = {};
  std::uint16_t row[8] = {};
};

// Two exchange areas per warp used in turn: lane L may overwrite area p only after passing another
// barrier of its warp, which every lane reaches only after it has finished reading area p. The
// CUDA threads are fibers of one OS thread (simt_emulation.h), so per-thread state is an array
// indexed by the thread's rank in its block, not thread_local.
inline LaneContribution exchange_areas[kMaxBlockThreads / kWarpSize][2][kWarpSize];
inline unsigned next_area[kMaxBlockThreads] = {};

inline bool cp_async_immediate = false;

// [begin, begin + bytes) is the shared memory of the block (unchecked when begin is null).
struct SharedWindow {
  const unsigned char* begin = nullptr;
  std::size_t bytes = 0;
};
inline SharedWindow shared_window;

[[noreturn]] inline void fail(const char* what, const void* address) {
  std::fprintf(stderr, "simt_mma_emulation: %s (address %p, thread %u of block %u,%u)\n", what,
               address, thread_index.x, block_index.x, block_index.y);
  std::abort();
}

inline void check_shared_16(const void* address, const char* op) {
  if (reinterpret_cast<std::uintptr_t>(address) % 16 != 0) fail(op, address);
  const SharedWindow w = shared_window;
  if (w.begin == nullptr) return;
  const auto* p = static_cast<const unsigned char*>(address);
  if (p < w.begin || p + 16 > w.begin + w.bytes) fail(op, address);
}

// Publishes this lane's contribution and returns the warp's 32, in lane order.
inline const LaneContribution* exchange(const LaneContribution& mine) {
  const unsigned t = thread_rank, warp = t / kWarpSize;
  LaneContribution* area = exchange_areas[warp][next_area[t]];
  next_area[t] ^= 1u;
  area[t % kWarpSize] = mine;
  state->warp_of[warp]->arrive_and_wait();
  return area;
}

template <typename T>
float widen_bits(std::uint16_t bits) {
  if constexpr (std::is_same_v<T, kernels::mma::Bf16>) {
    return tensor::to_float(tensor::BFloat16{bits});
  } else {
    return tensor::to_float(tensor::Float16{bits});
  }
}

// Element `half` (0: low, 1: high) of a register holding two 16-bit values.
template <typename T>
float element(std::uint32_t reg, int half) {
  return widen_bits<T>(static_cast<std::uint16_t>(half == 0 ? reg & 0xFFFFu : reg >> 16));
}

inline void ldmatrix(std::uint32_t r[4], const void* row, bool trans) {
  check_shared_16(row, "ldmatrix row address not 16-byte aligned or outside shared memory");
  LaneContribution mine;
  std::memcpy(mine.row, row, sizeof(mine.row));
  const LaneContribution* all = exchange(mine);
  const unsigned lane = thread_index.x % kWarpSize;
  for (unsigned i = 0; i < 4; ++i) {
    // Matrix i's rows come from lanes 8i … 8i + 7. Each thread receives a fragment of a row
    // (lane / 4), columns 2·(lane % 4) and the next; .trans loads the matrix column-major: the
    // same fragment of the transpose.
    std::uint16_t lo, hi;
    if (!trans) {
      const LaneContribution& source = all[8 * i + lane / 4];
      lo = source.row[2 * (lane % 4)];
      hi = source.row[2 * (lane % 4) + 1];
    } else {
      lo = all[8 * i + 2 * (lane % 4)].row[lane / 4];
      hi = all[8 * i + 2 * (lane % 4) + 1].row[lane / 4];
    }
    r[i] = static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
  }
}

struct PendingCopy {
  void* dst;
  const void* src;
  bool inside;
};

inline void perform(const PendingCopy& copy) {
  if (copy.inside) {
    std::memcpy(copy.dst, copy.src, 16);
  } else {
    std::memset(copy.dst, 0, 16);
  }
}

inline std::vector<PendingCopy> open_groups[kMaxBlockThreads];
inline std::deque<std::vector<PendingCopy>> committed_groups[kMaxBlockThreads];

}  // namespace mds::simt::mma_emulation

namespace mds::kernels::mma {

template <typename T>
void mma_16816(float d[4], const std::uint32_t a[4], const std::uint32_t b[2]) {
  namespace em = simt::mma_emulation;
  em::LaneContribution mine;
  for (int r = 0; r < 4; ++r) mine.a[r] = a[r];
  for (int r = 0; r < 2; ++r) mine.b[r] = b[r];
  const em::LaneContribution* all = em::exchange(mine);

  // A (16×16) and B (16×8) as the ISA distributes them: fragment elements a0 … a7 and b0 … b3,
  // two per 32-bit register, the lower-numbered in the low half.
  float A[16][16], B[16][8];
  for (int laneid = 0; laneid < 32; ++laneid) {
    const int groupID = laneid >> 2, threadID_in_group = laneid % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = (i < 2 || (4 <= i && i < 6)) ? groupID : groupID + 8;
      const int col =
          i < 4 ? (threadID_in_group * 2) + (i & 0x1) : (threadID_in_group * 2) + (i & 0x1) + 8;
      A[row][col] = em::element<T>(all[laneid].a[i / 2], i % 2);
    }
    for (int i = 0; i < 4; ++i) {
      const int row =
          i < 2 ? (threadID_in_group * 2) + (i & 0x1) : (threadID_in_group * 2) + (i & 0x1) + 8;
      const int col = groupID;
      B[row][col] = em::element<T>(all[laneid].b[i / 2], i % 2);
    }
  }
  // This lane's accumulators c0 … c3.
  const int laneid = static_cast<int>(simt::thread_index.x % simt::kWarpSize);
  const int groupID = laneid >> 2, threadID_in_group = laneid % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = i < 2 ? groupID : groupID + 8;
    const int col = (threadID_in_group * 2) + (i & 0x1);
    float sum = d[i];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    d[i] = sum;
  }
}

inline void ldmatrix_x4(std::uint32_t r[4], const void* row) {
  simt::mma_emulation::ldmatrix(r, row, false);
}

inline void ldmatrix_x4_trans(std::uint32_t r[4], const void* row) {
  simt::mma_emulation::ldmatrix(r, row, true);
}

inline void cp_async_16(void* dst, const void* src, bool inside) {
  namespace em = simt::mma_emulation;
  em::check_shared_16(dst, "cp.async destination not 16-byte aligned or outside shared memory");
  if (reinterpret_cast<std::uintptr_t>(src) % 16 != 0) {
    em::fail("cp.async source not 16-byte aligned", src);
  }
  const em::PendingCopy copy{dst, src, inside};
  if (em::cp_async_immediate) {
    em::perform(copy);
  } else {
    em::open_groups[simt::thread_rank].push_back(copy);
  }
}

inline Chunk16 load_16(const void* p) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) {
    simt::mma_emulation::fail("16-byte load not 16-byte aligned", p);
  }
  Chunk16 chunk;
  std::memcpy(&chunk, p, sizeof(chunk));
  return chunk;
}

inline void cp_async_commit() {
  namespace em = simt::mma_emulation;
  std::vector<em::PendingCopy>& open = em::open_groups[simt::thread_rank];
  em::committed_groups[simt::thread_rank].push_back(std::move(open));
  open.clear();
}

template <int kPending>
void cp_async_wait() {
  namespace em = simt::mma_emulation;
  auto& committed = em::committed_groups[simt::thread_rank];
  while (committed.size() > static_cast<std::size_t>(kPending)) {
    for (const em::PendingCopy& copy : committed.front()) em::perform(copy);
    committed.pop_front();
  }
}

template <typename T>
std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, Bf16>) {
    return static_cast<std::uint32_t>(tensor::to_bfloat16(lo).bits) |
           (static_cast<std::uint32_t>(tensor::to_bfloat16(hi).bits) << 16);
  } else {
    return static_cast<std::uint32_t>(tensor::to_float16(lo).bits) |
           (static_cast<std::uint32_t>(tensor::to_float16(hi).bits) << 16);
  }
}

template <typename T>
float widen(std::uint16_t bits) {
  return simt::mma_emulation::widen_bits<T>(bits);
}

}  // namespace mds::kernels::mma
