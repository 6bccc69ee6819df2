#include "dist/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/error.h"
#include "dist/communicator.h"

namespace mds::dist {
namespace {

using tensor::DType;

TEST(DistReduce, SumAndMaxFloat) {
  std::vector<float> acc{1.0f, -2.0f, 3.0f, 0.0f};
  const std::vector<float> src{0.5f, 5.0f, std::nanf(""), -1.0f};
  std::vector<float> sum = acc;
  reduce_into(DType::kFloat32, ReduceOp::kSum, sum.data(), src.data(), 4);
  EXPECT_EQ(sum[0], 1.5f);
  EXPECT_EQ(sum[1], 3.0f);
  EXPECT_TRUE(std::isnan(sum[2]));
  reduce_into(DType::kFloat32, ReduceOp::kMax, acc.data(), src.data(), 4);
  EXPECT_EQ(acc[0], 1.0f);
  EXPECT_EQ(acc[1], 5.0f);
  EXPECT_TRUE(std::isnan(acc[2]));  // MAX propagates NaN (overflow checks rely on it)
  EXPECT_EQ(acc[3], 0.0f);
}

TEST(DistReduce, IntegersAndDoubles) {
  std::vector<std::int64_t> a{1, std::int64_t{1} << 40};
  const std::vector<std::int64_t> b{-3, 7};
  reduce_into(DType::kInt64, ReduceOp::kSum, a.data(), b.data(), 2);
  EXPECT_EQ(a, (std::vector<std::int64_t>{-2, (std::int64_t{1} << 40) + 7}));
  std::vector<double> x{0.1, 2.0};
  const std::vector<double> y{0.2, 1.0};
  reduce_into(DType::kFloat64, ReduceOp::kMax, x.data(), y.data(), 2);
  EXPECT_EQ(x, (std::vector<double>{0.2, 2.0}));
}

TEST(DistReduce, BFloat16RoundsEachStep) {
  // 256 + 1 is not representable in bf16 (8 significant bits): rounds to even, 256.
  std::vector<tensor::BFloat16> acc{tensor::to_bfloat16(256.0f)};
  const std::vector<tensor::BFloat16> one{tensor::to_bfloat16(1.0f)};
  reduce_into(DType::kBFloat16, ReduceOp::kSum, acc.data(), one.data(), 1);
  EXPECT_EQ(tensor::to_float(acc[0]), 256.0f);
}

TEST(DistReduce, RejectsUnreducibleDtype) {
  EXPECT_THROW(check_reduce_dtype("tp", CommOp::kAllReduce, DType::kBool), base::Error);
  EXPECT_NO_THROW(check_reduce_dtype("tp", CommOp::kAllReduce, DType::kBFloat16));
}

TEST(DistReduce, AllReduceChunksCoverTheBuffer) {
  for (std::int64_t count : {0, 1, 7, 8, 9, 1000}) {
    for (int n = 1; n <= 8; ++n) {
      std::int64_t next = 0;
      for (int i = 0; i < n; ++i) {
        const Chunk c = all_reduce_chunk(count, n, i);
        ASSERT_EQ(c.offset, next);
        ASSERT_TRUE(c.count == count / n || c.count == count / n + 1);
        next += c.count;
      }
      ASSERT_EQ(next, count);
    }
  }
  EXPECT_EQ(all_reduce_chunk(10, 4, 1).offset, 3);  // chunks 3, 3, 2, 2
  EXPECT_EQ(all_reduce_chunk(10, 4, 3).count, 2);
}

}  // namespace
}  // namespace mds::dist
