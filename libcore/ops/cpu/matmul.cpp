#include "ops/cpu/matmul.h"

#include <algorithm>
#include <array>

#include "ops/cpu/gemm.h"

namespace mds::ops::cpu {

void linear_forward(float* out, const float* x, const float* weight, const float* bias,
                    std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m == 0 || n == 0) return;
  float beta = 0.0f;
  if (bias != nullptr) {
    // Preloading the bias and letting the GEMM add onto it (beta = 1) is how cuBLAS-based
    // upstream fuses the bias; the sum order (bias + Σ) is the same.
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) out[i * n + j] = bias[j];
    }
    beta = 1.0f;
  }
  gemm(m, n, k, 1.0f, {x, k, false}, {weight, k, true}, beta, out, n);
}

void linear_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                     const float* weight, std::int64_t m, std::int64_t n, std::int64_t k,
                     bool accumulate_dweight) {
  if (dx != nullptr && m > 0 && k > 0) {
    gemm(m, k, n, 1.0f, {dout, n, false}, {weight, k, false}, 1.0f, dx, k);
  }
  if (dweight != nullptr && n > 0 && k > 0) {
    // beta = 0 zeroes dweight and then adds the product as beta = 1 adds it onto zeros.
    gemm(n, k, m, 1.0f, {dout, n, true}, {x, k, false}, accumulate_dweight ? 1.0f : 0.0f, dweight,
         k);
  }
  if (dbias != nullptr) {
    // Blocks of columns per thread, rows summed in order inside: every column's sum adds its
    // rows in order, so it does not depend on the thread count.
    constexpr std::int64_t kBlock = 64;
    const std::int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
      const std::int64_t begin = blk * kBlock, end = std::min(n, begin + kBlock);
      std::array<float, kBlock> sums{};
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = begin; j < end; ++j)
          sums[static_cast<std::size_t>(j - begin)] += dout[i * n + j];
      }
      for (std::int64_t j = begin; j < end; ++j)
        dbias[j] += sums[static_cast<std::size_t>(j - begin)];
    }
  }
}

void batched_matmul(float* out, const float* a, const float* b, std::int64_t batch, std::int64_t m,
                    std::int64_t n, std::int64_t k, bool transpose_a, bool transpose_b, float alpha,
                    float beta) {
  const std::int64_t lda = transpose_a ? m : k, ldb = transpose_b ? k : n;
  for (std::int64_t i = 0; i < batch; ++i) {
    gemm(m, n, k, alpha, {a + i * m * k, lda, transpose_a}, {b + i * k * n, ldb, transpose_b}, beta,
         out + i * m * n, n);
  }
}

}  // namespace mds::ops::cpu
