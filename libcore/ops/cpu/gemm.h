// The one place the CPU backend calls BLAS. OpenBLAS is kept single-threaded and every GEMM is
// split over the OpenMP threads instead: two thread pools on the same cores (OpenBLAS's pthreads
// and OpenMP's) each busy-wait after their work and take cores from each other, which cost a
// third of the step time on two cores.
#pragma once
#include <cstdint>

namespace mds::ops::cpu {

struct GemmOperand {
  const float* data;
  std::int64_t ld;  // leading dimension (row stride) as stored
  bool transposed;  // op(X) = Xᵀ
};

// Row-major C[m, n] = alpha · op(A)[m, k] · op(B)[k, n] + beta · C. Called outside a parallel
// region, C is split over the threads by blocks of rows (or of columns when n > m); inside one,
// it runs on the calling thread. The split depends only on the thread count, so results repeat
// for the same OMP_NUM_THREADS.
void gemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, GemmOperand a, GemmOperand b,
          float beta, float* c, std::int64_t ldc);

// The same GEMM on the calling thread only: for callers that parallelize over many GEMMs.
void gemm_on_this_thread(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, GemmOperand a,
                         GemmOperand b, float beta, float* c, std::int64_t ldc);

}  // namespace mds::ops::cpu
