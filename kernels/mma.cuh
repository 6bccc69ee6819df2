// Warp-level tensor-core primitives of the 16-bit attention kernels (attention_tc_kernels.cuh):
// mma.sync m16n8k16 with fp32 accumulation, ldmatrix (plain and .trans), cp.async of 16 bytes
// with zero fill, and the conversions between floats and 16-bit register halves.
//
// Under nvcc these are inline PTX (sm_80 and later). Anywhere else only the declarations are
// here: tests/unit/simt_mma_emulation.h defines them as warp-collective operations of the CPU's
// SIMT emulation, written from the PTX ISA's layouts and independently of the kernels, so a
// kernel whose fragments do not fit the layouts below fails its unit test.
//
// The layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" and
// "ldmatrix"); lane = 4·g + t (g = groupID, t = threadID_in_group); a 32-bit register holds two
// 16-bit elements, the one with the smaller index in its low half:
//   A 16×16, row:  a[0] = A[g][2t..2t+1]   a[1] = A[g+8][2t..2t+1]
//                  a[2] = A[g][2t+8..2t+9] a[3] = A[g+8][2t+8..2t+9]
//   B 16×8, col:   b[0] = B[2t..2t+1][g]   b[1] = B[2t+8..2t+9][g]
//   C, D 16×8 f32: c[0], c[1] = C[g][2t], C[g][2t+1]   c[2], c[3] = C[g+8][2t], C[g+8][2t+1]
//   ldmatrix.x4:   lane l gives the address of row l % 8 of 8×8 matrix l / 8 (16 bytes,
//                  16-byte aligned); register i receives matrix i's M[l/4][2(l%4)..2(l%4)+1],
//                  or with .trans M[2(l%4)][l/4] and M[2(l%4)+1][l/4].
// So an accumulator's c[0..1] and c[2..3] of two neighbouring n-tiles are exactly an A fragment
// of the 16-bit types (FlashAttention-2 reuses P from registers this way), a row-major [n][k]
// tile gives B fragments through plain ldmatrix and a row-major [k][n] tile through .trans.
#pragma once
#include <cstdint>
#include <type_traits>

namespace mds::kernels::mma {

// The 16-bit element type of a kernel instance: bf16 or fp16 (IEEE half).
struct Bf16 {};
struct Fp16 {};

// 16 bytes: eight 16-bit elements, the first in the low half of w[0].
struct alignas(16) Chunk16 {
  std::uint32_t w[4];
};

#if defined(__CUDACC__)

// d = A·B + d over one 16×8×16 tile, fp32 accumulation.
template <typename T>
__device__ inline void mma_16816(float d[4], const std::uint32_t a[4], const std::uint32_t b[2]) {
  if constexpr (std::is_same_v<T, Bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    static_assert(std::is_same_v<T, Fp16>, "mma_16816: Bf16 or Fp16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// Four 8×8 matrices of 16-bit elements from shared memory (`row`: this lane's row address).
__device__ inline void ldmatrix_x4(std::uint32_t r[4], const void* row) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ inline void ldmatrix_x4_trans(std::uint32_t r[4], const void* row) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// 16 bytes from global `src` to shared `dst` (both 16-byte aligned) without passing through
// registers; with `inside` false, 16 zero bytes instead (src is not read, but must be a valid
// address). Completes at the wait_group that covers its commit_group.
__device__ inline void cp_async_16(void* dst, const void* src, bool inside) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  const int bytes = inside ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(src),
               "r"(bytes));
}

// 16 bytes from global memory in one vector load (p 16-byte aligned).
__device__ inline Chunk16 load_16(const void* p) {
  return *static_cast<const Chunk16*>(p);
}

__device__ inline void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Two floats rounded to nearest even into one register, `lo` in the low half.
template <typename T>
__device__ inline std::uint32_t pack2(float lo, float hi) {
  std::uint32_t packed;
  if constexpr (std::is_same_v<T, Bf16>) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
  } else {
    static_assert(std::is_same_v<T, Fp16>, "pack2: Bf16 or Fp16");
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
  }
  return packed;
}

// One 16-bit element widened exactly.
template <typename T>
__device__ inline float widen(std::uint16_t bits) {
  if constexpr (std::is_same_v<T, Bf16>) {
    return __uint_as_float(static_cast<std::uint32_t>(bits) << 16);
  } else {
    static_assert(std::is_same_v<T, Fp16>, "widen: Bf16 or Fp16");
    float value;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(value) : "h"(bits));
    return value;
  }
}

#else  // the CPU emulation defines these (tests/unit/simt_mma_emulation.h)

template <typename T>
void mma_16816(float d[4], const std::uint32_t a[4], const std::uint32_t b[2]);
inline void ldmatrix_x4(std::uint32_t r[4], const void* row);
inline void ldmatrix_x4_trans(std::uint32_t r[4], const void* row);
inline void cp_async_16(void* dst, const void* src, bool inside);
inline Chunk16 load_16(const void* p);
inline void cp_async_commit();
template <int kPending>
void cp_async_wait();
template <typename T>
std::uint32_t pack2(float lo, float hi);
template <typename T>
float widen(std::uint16_t bits);

#endif

// The halves of a packed register, widened.
template <typename T>
__device__ inline float widen_low(std::uint32_t packed) {
  return widen<T>(static_cast<std::uint16_t>(packed & 0xFFFFu));
}

template <typename T>
__device__ inline float widen_high(std::uint32_t packed) {
  return widen<T>(static_cast<std::uint16_t>(packed >> 16));
}

}  // namespace mds::kernels::mma
