#include "ops/cpu/matmul.h"

#include <cblas.h>

namespace mds::ops::cpu {

namespace {
blasint to_blas(std::int64_t v) {
  return static_cast<blasint>(v);
}
}  // namespace

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
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, to_blas(m), to_blas(n), to_blas(k), 1.0f, x,
              to_blas(k), weight, to_blas(k), beta, out, to_blas(n));
}

void linear_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                     const float* weight, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (dx != nullptr && m > 0 && k > 0) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, to_blas(m), to_blas(k), to_blas(n), 1.0f,
                dout, to_blas(n), weight, to_blas(k), 1.0f, dx, to_blas(k));
  }
  if (dweight != nullptr && n > 0 && k > 0) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, to_blas(n), to_blas(k), to_blas(m), 1.0f,
                dout, to_blas(n), x, to_blas(k), 1.0f, dweight, to_blas(k));
  }
  if (dbias != nullptr) {
    // One column per iteration, rows summed in order: the result does not depend on threads.
#pragma omp parallel for schedule(static)
    for (std::int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (std::int64_t i = 0; i < m; ++i) sum += dout[i * n + j];
      dbias[j] += sum;
    }
  }
}

void batched_matmul(float* out, const float* a, const float* b, std::int64_t batch, std::int64_t m,
                    std::int64_t n, std::int64_t k, bool transpose_a, bool transpose_b, float alpha,
                    float beta) {
  const blasint lda = to_blas(transpose_a ? m : k);
  const blasint ldb = to_blas(transpose_b ? k : n);
  for (std::int64_t i = 0; i < batch; ++i) {
    cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
                transpose_b ? CblasTrans : CblasNoTrans, to_blas(m), to_blas(n), to_blas(k), alpha,
                a + i * m * k, lda, b + i * k * n, ldb, beta, out + i * m * n, to_blas(n));
  }
}

}  // namespace mds::ops::cpu
