#include "ops/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "ops/cpu/openblas_kernels.h"

namespace mds::ops::cpu {

namespace {

blasint to_blas(std::int64_t v) {
  return static_cast<blasint>(v);
}

// Once, before the first GEMM: the widest kernels the CPU runs, on one thread.
void prepare_openblas() {
  static const bool done = [] {
    openblas_kernel_choice();
    openblas_set_num_threads(1);
    return true;
  }();
  (void)done;
}

// Below this many multiply-adds a split costs more than it saves.
constexpr std::int64_t kMinSplitWork = 1 << 18;
// Blocks start on multiples of the widest register tile, so most tiles stay full.
constexpr std::int64_t kSplitAlign = 16;

std::int64_t block_start(std::int64_t extent, std::int64_t parts, std::int64_t part) {
  const std::int64_t units = (extent + kSplitAlign - 1) / kSplitAlign;
  return std::min(extent, units * part / parts * kSplitAlign);
}

}  // namespace

void gemm_on_this_thread(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, GemmOperand a,
                         GemmOperand b, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  prepare_openblas();
  cblas_sgemm(CblasRowMajor, a.transposed ? CblasTrans : CblasNoTrans,
              b.transposed ? CblasTrans : CblasNoTrans, to_blas(m), to_blas(n), to_blas(k), alpha,
              a.data, to_blas(a.ld), b.data, to_blas(b.ld), beta, c, to_blas(ldc));
}

void gemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, GemmOperand a, GemmOperand b,
          float beta, float* c, std::int64_t ldc) {
  const std::int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || m * n * k < kMinSplitWork) {
    gemm_on_this_thread(m, n, k, alpha, a, b, beta, c, ldc);
    return;
  }
  const bool by_rows = m >= n;
  const std::int64_t extent = by_rows ? m : n;
#pragma omp parallel num_threads(static_cast <int>(threads))
  {
    const std::int64_t parts = omp_get_num_threads(), part = omp_get_thread_num();
    const std::int64_t begin = block_start(extent, parts, part);
    const std::int64_t end = block_start(extent, parts, part + 1);
    if (end > begin && by_rows) {
      // Rows [begin, end) of C: the same rows of op(A).
      GemmOperand rows = a;
      rows.data += a.transposed ? begin : begin * a.ld;
      gemm_on_this_thread(end - begin, n, k, alpha, rows, b, beta, c + begin * ldc, ldc);
    } else if (end > begin) {
      // Columns [begin, end) of C: the same columns of op(B).
      GemmOperand cols = b;
      cols.data += b.transposed ? begin * b.ld : begin;
      gemm_on_this_thread(m, end - begin, k, alpha, a, cols, beta, c + begin, ldc);
    }
  }
}

}  // namespace mds::ops::cpu
