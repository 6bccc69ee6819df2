#include <gtest/gtest.h>

#include "base/error.h"
#include "ops/elementwise.h"
#include "ops_test_util.h"
#include "tensor/dtype.h"

namespace mds::ops {
namespace {

using ops_test::random_floats;
using ops_test::view;
using tensor::BFloat16;
using tensor::Float16;

TEST(OpsElementwise, AddScaleFill) {
  auto a = random_floats(50, 1), b = random_floats(50, 2);
  std::vector<float> out(50);
  add(view(out, {5, 10}), view(a, {5, 10}), view(b, {5, 10}));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
  scale(view(out, {5, 10}), view(out, {5, 10}), 0.5f);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(out[i], (a[i] + b[i]) * 0.5f);
  fill(view(out, {5, 10}), 3.25f);
  for (const float v : out) EXPECT_EQ(v, 3.25f);
  std::vector<BFloat16> half(4);
  fill(view(half, {4}), 1.0f / 3.0f);
  EXPECT_EQ(half[2].bits, tensor::to_bfloat16(1.0f / 3.0f).bits);
  EXPECT_THROW(add(view(out, {5, 10}), view(a, {10, 5}), view(b, {5, 10})), base::Error);
}

TEST(OpsElementwise, CastRoundsLikeTheDTypeConversions) {
  auto x = random_floats(64, 3, -1000, 1000);
  std::vector<BFloat16> bf(64);
  std::vector<Float16> fp(64);
  std::vector<float> back(64);
  cast(view(bf, {64}), view(x, {8, 8}));
  cast(view(fp, {64}), view(bf, {64}));
  cast(view(back, {64}), view(fp, {64}));
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(bf[i].bits, tensor::to_bfloat16(x[i]).bits);
    EXPECT_EQ(fp[i].bits, tensor::to_float16(tensor::to_float(bf[i])).bits);
    EXPECT_EQ(back[i], tensor::to_float(fp[i]));
  }
  std::vector<std::int64_t> ids(64);
  EXPECT_THROW(cast(view(ids, {64}), view(x, {64})), base::Error);
}

}  // namespace
}  // namespace mds::ops
