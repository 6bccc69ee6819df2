// The emulated tensor-core primitives (simt_mma_emulation.h) against plain matrix products: the
// mma's fragments built here per register from the PTX ISA's figures (a second transcription,
// per register rather than per element as in the emulator), ldmatrix feeding the mma from
// row-major tiles both ways (plain from [n][k], .trans from [k][n]), an accumulator reused as an A
// operand (FlashAttention-2's P), the conversions, and cp.async's deferred copies.
#include "tests/unit/simt_mma_emulation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <type_traits>
#include <vector>

#include "tensor/round_to.h"

namespace mds {
namespace {

namespace mma = kernels::mma;

template <typename T>
using Storage = std::conditional_t<std::is_same_v<T, mma::Bf16>, tensor::BFloat16, tensor::Float16>;

// A rows × cols matrix of 16-bit values (row-major, stride `ld` elements), random in [-2, 2).
template <typename T>
struct Matrix {
  int rows, cols, ld;
  std::vector<std::uint16_t> bits;
  float at(int r, int c) const {
    return simt::mma_emulation::widen_bits<T>(bits[static_cast<std::size_t>(r * ld + c)]);
  }
};

template <typename T>
Matrix<T> random_matrix(int rows, int cols, int ld, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  Matrix<T> m{rows, cols, ld, std::vector<std::uint16_t>(static_cast<std::size_t>(rows * ld), 0)};
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      m.bits[static_cast<std::size_t>(r * ld + c)] = tensor::round_to<Storage<T>>(dist(rng)).bits;
    }
  }
  return m;
}

std::uint32_t pair(std::uint16_t lo, std::uint16_t hi) {
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

// Runs body(lane) on the 32 lanes of one emulated warp.
void on_one_warp(const std::function<void(int)>& body) {
  simt::mma_emulation::shared_window = {};  // host arrays stand in for shared memory here
  simt::launch(
      1, 1, 32, [&] { body(static_cast<int>(simt::thread_index.x)); }, [] {});
}

// C (16 × 8·tiles) gathered from each lane's accumulators: c0, c1 in row groupID, c2, c3 in row
// groupID + 8, columns 2·threadID_in_group and the next.
struct Gathered {
  std::vector<float> c;  // [16][8·tiles]
  int cols;
  float at(int r, int col) const { return c[static_cast<std::size_t>(r * cols + col)]; }
};

void scatter(Gathered& out, int lane, int tile, const float acc[4]) {
  for (int i = 0; i < 4; ++i) {
    const int row = lane / 4 + (i < 2 ? 0 : 8), col = 8 * tile + 2 * (lane % 4) + i % 2;
    out.c[static_cast<std::size_t>(row * out.cols + col)] = acc[i];
  }
}

// Every element of got within the fp32 accumulation error of A·B (+ C0 = 0), in double.
template <typename T>
void expect_product(const Gathered& got, const Matrix<T>& a,
                    const std::function<float(int, int)>& b, int n) {
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < n; ++c) {
      double exact = 0.0, magnitude = 0.0;
      for (int k = 0; k < 16; ++k) {
        exact += static_cast<double>(a.at(r, k)) * b(k, c);
        magnitude += std::fabs(static_cast<double>(a.at(r, k)) * b(k, c));
      }
      ASSERT_NEAR(got.at(r, c), exact, 16 * 0x1p-24 * magnitude) << "C[" << r << "][" << c << "]";
    }
  }
}

template <typename T>
void check_isa_fragments() {
  const Matrix<T> a = random_matrix<T>(16, 16, 16, 1), b = random_matrix<T>(16, 8, 8, 2);
  Gathered got{std::vector<float>(16 * 8, NAN), 8};
  on_one_warp([&](int lane) {
    const int g = lane / 4, t = lane % 4;
    const auto A = [&](int r, int c) { return a.bits[static_cast<std::size_t>(r * 16 + c)]; };
    const auto B = [&](int r, int c) { return b.bits[static_cast<std::size_t>(r * 8 + c)]; };
    // Figure "MMA .m16n8k16 fragment layout for matrix A": a0,a1 | a2,a3 | a4,a5 | a6,a7.
    const std::uint32_t ra[4] = {
        pair(A(g, 2 * t), A(g, 2 * t + 1)), pair(A(g + 8, 2 * t), A(g + 8, 2 * t + 1)),
        pair(A(g, 2 * t + 8), A(g, 2 * t + 9)), pair(A(g + 8, 2 * t + 8), A(g + 8, 2 * t + 9))};
    // "... for matrix B": b0,b1 | b2,b3, column groupID.
    const std::uint32_t rb[2] = {pair(B(2 * t, g), B(2 * t + 1, g)),
                                 pair(B(2 * t + 8, g), B(2 * t + 9, g))};
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma::mma_16816<T>(acc, ra, rb);
    scatter(got, lane, 0, acc);
  });
  expect_product<T>(
      got, a, [&](int k, int c) { return b.at(k, c); }, 8);
}

TEST(SimtMmaEmulation, MmaOfIsaFragmentsIsTheMatrixProduct) {
  check_isa_fragments<mma::Bf16>();
  check_isa_fragments<mma::Fp16>();
}

// A from a row-major 16×16 tile, B (16×16: two n-tiles) from Bᵀ stored [n][k] (plain ldmatrix)
// and from B stored [k][n] (.trans); rows padded to 24 elements (48 bytes, 16-byte aligned).
template <typename T>
void check_ldmatrix_feeds() {
  constexpr int kLd = 24;
  const Matrix<T> a = random_matrix<T>(16, 16, kLd, 3), b = random_matrix<T>(16, 16, kLd, 4);
  Matrix<T> bt{16, 16, kLd, std::vector<std::uint16_t>(16 * kLd, 0)};
  for (int k = 0; k < 16; ++k) {
    for (int n = 0; n < 16; ++n)
      bt.bits[static_cast<std::size_t>(n * kLd + k)] =
          b.bits[static_cast<std::size_t>(k * kLd + n)];
  }
  Gathered plain{std::vector<float>(16 * 16, NAN), 16}, trans{std::vector<float>(16 * 16, NAN), 16};
  on_one_warp([&](int lane) {
    const int matrix = lane / 8, row = lane % 8;
    // A: matrices (rows 0–7, k 0–7), (rows 8–15, k 0–7), (rows 0–7, k 8–15), (rows 8–15, k 8–15).
    std::uint32_t ra[4];
    mma::ldmatrix_x4(
        ra, &a.bits[static_cast<std::size_t>((row + 8 * (matrix % 2)) * kLd + 8 * (matrix / 2))]);
    // Bᵀ rows are B's columns: matrices (n 0–7, k 0–7), (n 0–7, k 8–15), (n 8–15, k 0–7),
    // (n 8–15, k 8–15) give b[0], b[1] of n-tile 0, then of n-tile 1.
    std::uint32_t rb[4];
    mma::ldmatrix_x4(
        rb, &bt.bits[static_cast<std::size_t>((row + 8 * (matrix / 2)) * kLd + 8 * (matrix % 2))]);
    // B's rows, transposed on load: matrices (k 0–7, n 0–7), (k 8–15, n 0–7), (k 0–7, n 8–15),
    // (k 8–15, n 8–15).
    std::uint32_t rt[4];
    mma::ldmatrix_x4_trans(
        rt, &b.bits[static_cast<std::size_t>((row + 8 * (matrix % 2)) * kLd + 8 * (matrix / 2))]);
    for (int tile = 0; tile < 2; ++tile) {
      float p[4] = {0.0f, 0.0f, 0.0f, 0.0f}, q[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      const std::uint32_t bp[2] = {rb[2 * tile], rb[2 * tile + 1]};
      const std::uint32_t bq[2] = {rt[2 * tile], rt[2 * tile + 1]};
      mma::mma_16816<T>(p, ra, bp);
      mma::mma_16816<T>(q, ra, bq);
      scatter(plain, lane, tile, p);
      scatter(trans, lane, tile, q);
    }
  });
  expect_product<T>(
      plain, a, [&](int k, int c) { return b.at(k, c); }, 16);
  EXPECT_EQ(plain.c, trans.c);
}

TEST(SimtMmaEmulation, LdmatrixFragmentsFeedTheMma) {
  check_ldmatrix_feeds<mma::Bf16>();
  check_ldmatrix_feeds<mma::Fp16>();
}

// S = A·B in accumulators, then S rounded to 16 bits and reused as the A operand of S·V (the
// accumulators of n-tiles 0 and 1 are the A fragment's columns 0–7 and 8–15).
template <typename T>
void check_accumulator_reuse() {
  constexpr int kLd = 24;
  const Matrix<T> a = random_matrix<T>(16, 16, kLd, 5), b = random_matrix<T>(16, 16, kLd, 6);
  const Matrix<T> v = random_matrix<T>(16, 8, kLd, 7);
  Gathered s{std::vector<float>(16 * 16, NAN), 16}, sv{std::vector<float>(16 * 8, NAN), 8};
  on_one_warp([&](int lane) {
    const int matrix = lane / 8, row = lane % 8, g = lane / 4, t = lane % 4;
    std::uint32_t ra[4];
    mma::ldmatrix_x4(
        ra, &a.bits[static_cast<std::size_t>((row + 8 * (matrix % 2)) * kLd + 8 * (matrix / 2))]);
    std::uint32_t rt[4];
    mma::ldmatrix_x4_trans(
        rt, &b.bits[static_cast<std::size_t>((row + 8 * (matrix % 2)) * kLd + 8 * (matrix / 2))]);
    float acc[2][4] = {};
    for (int tile = 0; tile < 2; ++tile) {
      const std::uint32_t bq[2] = {rt[2 * tile], rt[2 * tile + 1]};
      mma::mma_16816<T>(acc[tile], ra, bq);
      scatter(s, lane, tile, acc[tile]);
    }
    const std::uint32_t reused[4] = {
        mma::pack2<T>(acc[0][0], acc[0][1]), mma::pack2<T>(acc[0][2], acc[0][3]),
        mma::pack2<T>(acc[1][0], acc[1][1]), mma::pack2<T>(acc[1][2], acc[1][3])};
    const auto V = [&](int r, int c) { return v.bits[static_cast<std::size_t>(r * kLd + c)]; };
    const std::uint32_t rv[2] = {pair(V(2 * t, g), V(2 * t + 1, g)),
                                 pair(V(2 * t + 8, g), V(2 * t + 9, g))};
    float out[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma::mma_16816<T>(out, reused, rv);
    scatter(sv, lane, 0, out);
  });
  Matrix<T> s16{16, 16, 16, std::vector<std::uint16_t>(16 * 16)};
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) {
      s16.bits[static_cast<std::size_t>(r * 16 + c)] =
          tensor::round_to<Storage<T>>(s.at(r, c)).bits;
    }
  }
  expect_product<T>(
      sv, s16, [&](int k, int c) { return v.at(k, c); }, 8);
}

TEST(SimtMmaEmulation, AccumulatorsReusedAsAOperand) {
  check_accumulator_reuse<mma::Bf16>();
  check_accumulator_reuse<mma::Fp16>();
}

TEST(SimtMmaEmulation, ConversionsRoundToNearestEven) {
  // 1 + 2^-8 is halfway between two bf16 values: to even (1); 1 + 3·2^-8 rounds up.
  EXPECT_EQ(mma::pack2<mma::Bf16>(1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f), pair(0x3F80, 0x3F82));
  EXPECT_EQ(mma::pack2<mma::Fp16>(1.0f + 0x1p-11f, -2.0f), pair(0x3C00, 0xC000));
  EXPECT_EQ(mma::widen_high<mma::Bf16>(pair(0, 0x4040)), 3.0f);
  EXPECT_EQ(mma::widen_low<mma::Fp16>(pair(0x3555, 0)), tensor::to_float(tensor::Float16{0x3555}));
}

// A copy lands at the wait that covers its group (zeros for a copy from outside the tensor),
// later groups may stay in flight, and with cp_async_immediate it lands at issue.
TEST(SimtMmaEmulation, CpAsyncLandsAtItsWait) {
  alignas(16) std::uint16_t src[16], dst[16];
  for (int i = 0; i < 16; ++i) {
    src[i] = static_cast<std::uint16_t>(100 + i);
    dst[i] = 7;
  }
  std::vector<std::uint16_t> before_wait, after_first, after_all;
  on_one_warp([&](int lane) {
    if (lane != 0) return;
    mma::cp_async_16(dst, src, true);
    mma::cp_async_commit();
    mma::cp_async_16(dst + 8, src + 8, false);
    mma::cp_async_commit();
    before_wait.assign(dst, dst + 16);
    mma::cp_async_wait<1>();
    after_first.assign(dst, dst + 16);
    mma::cp_async_wait<0>();
    after_all.assign(dst, dst + 16);
  });
  EXPECT_EQ(before_wait, std::vector<std::uint16_t>(16, 7));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(after_first[static_cast<std::size_t>(i)], 100 + i);
  EXPECT_EQ(after_first[8], 7);
  for (int i = 8; i < 16; ++i) EXPECT_EQ(after_all[static_cast<std::size_t>(i)], 0);

  simt::mma_emulation::cp_async_immediate = true;
  on_one_warp([&](int lane) {
    if (lane == 0) mma::cp_async_16(dst, src + 8, true);
  });
  simt::mma_emulation::cp_async_immediate = false;
  EXPECT_EQ(dst[0], 108);
}

}  // namespace
}  // namespace mds
