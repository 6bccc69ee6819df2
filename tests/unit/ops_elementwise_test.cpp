#include <gtest/gtest.h>

#include <string>
#include <vector>

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

// A gather of three pieces (one empty) into bf16: each piece rounded as cast rounds it, the
// elements outside the pieces untouched; a piece past either end is refused naming the op.
TEST(OpsElementwise, CastPiecesCastsEachPieceAlone) {
  auto x = random_floats(20, 4, -10, 10);
  std::vector<BFloat16> out(12, BFloat16{0x7FC1});
  const std::vector<CastPiece> pieces = {{0, 15, 3}, {3, 2, 0}, {5, 1, 6}};
  cast_pieces(DeviceContext{}, view(out, {12}), view(x, {20}), pieces);
  for (int i = 0; i < 12; ++i) {
    const int from = i < 3 ? 15 + i : i >= 5 && i < 11 ? i - 4 : -1;
    SCOPED_TRACE(i);
    EXPECT_EQ(out[i].bits, from < 0 ? 0x7FC1 : tensor::to_bfloat16(x[from]).bits);
  }
  // Times a factor: the fp32 product rounded once to bf16.
  cast_pieces(DeviceContext{}, view(out, {12}), view(x, {20}), pieces, 0.37f);
  for (int i = 0; i < 12; ++i) {
    const int from = i < 3 ? 15 + i : i >= 5 && i < 11 ? i - 4 : -1;
    SCOPED_TRACE(i);
    EXPECT_EQ(out[i].bits, from < 0 ? 0x7FC1 : tensor::to_bfloat16(x[from] * 0.37f).bits);
  }
  const std::vector<CastPiece> past_x = {{0, 18, 3}}, past_out = {{10, 0, 3}};
  EXPECT_THROW(cast_pieces(DeviceContext{}, view(out, {12}), view(x, {20}), past_x), base::Error);
  try {
    cast_pieces(DeviceContext{}, view(out, {12}), view(x, {20}), past_out);
    ADD_FAILURE() << "a piece past out's end was accepted";
  } catch (const base::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("ops::cast_pieces: piece 0 reads or writes [10, 13) of out, "
                                   "which has 12 elements"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mds::ops
