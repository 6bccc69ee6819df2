#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>

#include "ops/cpu/gemm.h"
#include "ops_test_util.h"

namespace mds::ops::cpu {
namespace {

using ops_test::random_floats;

struct Case {
  std::int64_t m, n, k;
};

// Restores the OpenMP thread count a test changed.
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ThreadCount() { omp_set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

// C = 0.5·op(A)·op(B) + 1·C with leading dimensions wider than the rows (padding of 3), checked
// against a double-precision loop; C starts at ones so that beta is exercised.
std::vector<float> run_case(const Case& c, bool ta, bool tb) {
  const std::int64_t a_rows = ta ? c.k : c.m, a_cols = ta ? c.m : c.k;
  const std::int64_t b_rows = tb ? c.n : c.k, b_cols = tb ? c.k : c.n;
  const std::int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = c.n + 3;
  const auto a = random_floats(a_rows * lda, 1), b = random_floats(b_rows * ldb, 2);
  std::vector<float> out(c.m * ldc, 1.0f);
  gemm(c.m, c.n, c.k, 0.5f, {a.data(), lda, ta}, {b.data(), ldb, tb}, 1.0f, out.data(), ldc);
  for (std::int64_t i = 0; i < c.m; ++i) {
    for (std::int64_t j = 0; j < c.n; ++j) {
      double sum = 0.0;
      for (std::int64_t p = 0; p < c.k; ++p) {
        const float x = ta ? a[p * lda + i] : a[i * lda + p];
        const float y = tb ? b[j * ldb + p] : b[p * ldb + j];
        sum += static_cast<double>(x) * y;
      }
      const double want = 1.0 + 0.5 * sum;
      EXPECT_NEAR(out[i * ldc + j], want, 1e-4 * (1.0 + std::fabs(want)))
          << c.m << "x" << c.n << "x" << c.k << " ta=" << ta << " tb=" << tb << " at " << i << ","
          << j;
    }
    for (std::int64_t j = c.n; j < ldc; ++j) EXPECT_EQ(out[i * ldc + j], 1.0f) << "padding";
  }
  return out;
}

TEST(OpsGemm, SplitsOverThreadsByRowsOrColumnsAndMatchesNaive) {
  // Large enough to be split; rows > columns, columns > rows, and a deep thin product.
  const Case cases[] = {{300, 70, 40}, {50, 301, 33}, {33, 40, 400}};
  for (const int threads : {1, 2, 3}) {
    const ThreadCount scope(threads);
    for (const Case& c : cases) {
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          const auto first = run_case(c, ta, tb);
          // The split depends only on the thread count: a repeat is bit-identical.
          const auto again = run_case(c, ta, tb);
          EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)), 0);
        }
      }
    }
  }
}

TEST(OpsGemm, InsideAParallelRegionRunsOnTheCallingThread) {
  const Case c{300, 70, 40};
  std::vector<float> serial, nested;
  {
    const ThreadCount scope(1);
    serial = run_case(c, false, true);
  }
  const ThreadCount scope(2);
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    nested = run_case(c, false, true);
  }
  EXPECT_EQ(std::memcmp(serial.data(), nested.data(), serial.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace mds::ops::cpu
