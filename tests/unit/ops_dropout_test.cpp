#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "base/error.h"
#include "ops/dropout.h"
#include "ops/philox.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_close;
using ops_test::numeric_grad;
using ops_test::random_floats;
using ops_test::view;
using ops_test::weighted_sum;

// Known-answer vectors of Random123's kat_vectors for philox4x32 with 10 rounds.
TEST(OpsPhilox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(OpsDropout, KeepsAboutOneMinusPAndScalesKeptValues) {
  constexpr std::int64_t kN = 100003;
  std::vector<float> x(kN, 2.0f), out(kN);
  const DropoutStream stream{0.1f, 1234, 42};
  dropout_forward(view(out, {kN}), view(x, {kN}), stream);
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < kN; ++i) {
    const bool keep = dropout_keep(stream, static_cast<std::uint64_t>(i));
    ASSERT_EQ(out[i], keep ? 2.0f * static_cast<float>(1.0 / 0.9) : 0.0f) << i;
    kept += keep;
  }
  EXPECT_NEAR(static_cast<double>(kept) / kN, 0.9, 0.005);
  // Another offset is another mask.
  std::vector<float> other(kN);
  dropout_forward(view(other, {kN}), view(x, {kN}), {0.1f, 1234, 43});
  EXPECT_NE(out, other);
}

TEST(OpsDropout, MaskDoesNotDependOnTheThreadCount) {
  constexpr std::int64_t kN = 4099;
  auto x = random_floats(kN, 1);
  const DropoutStream stream{0.5f, 7, 8};
  std::vector<float> one(kN), many(kN);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  dropout_forward(view(one, {kN}), view(x, {kN}), stream);
  omp_set_num_threads(4);
  dropout_forward(view(many, {kN}), view(x, {kN}), stream);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, many);
}

TEST(OpsDropout, ZeroProbabilityCopiesAndBadProbabilityFails) {
  auto x = random_floats(10, 2);
  std::vector<float> out(10);
  dropout_forward(view(out, {10}), view(x, {10}), {0.0f, 1, 2});
  EXPECT_EQ(out, x);
  EXPECT_THROW(dropout_forward(view(out, {10}), view(x, {10}), {1.0f, 1, 2}), base::Error);
}

TEST(OpsDropout, BackwardReusesTheForwardMask) {
  constexpr std::int64_t kRows = 6, kH = 5;
  auto x = random_floats(kRows * kH, 3), bias = random_floats(kH, 4),
       res = random_floats(kRows * kH, 5);
  auto dout = random_floats(kRows * kH, 6);
  const DropoutStream stream{0.4f, 11, 12};
  auto loss = [&] {
    std::vector<float> out(x.size());
    bias_dropout_add_forward(view(out, {kRows, kH}), view(x, {kRows, kH}), view(bias, {kH}),
                             view(res, {kRows, kH}), stream);
    return weighted_sum(out, dout);
  };
  std::vector<float> dx(x.size()), dbias(kH), dres(x.size());
  bias_dropout_add_backward(view(dx, {kRows, kH}), view(dbias, {kH}), view(dres, {kRows, kH}),
                            view(dout, {kRows, kH}), stream);
  expect_close(dx, numeric_grad(x, loss), 1e-3, 1e-3, "dx");
  expect_close(dbias, numeric_grad(bias, loss), 1e-3, 1e-3, "dbias");
  expect_close(dres, numeric_grad(res, loss), 1e-3, 1e-3, "dresidual");
  // Plain dropout backward in place equals the dx above.
  auto g = dout;
  dropout_backward(view(g, {kRows, kH}), view(g, {kRows, kH}), stream);
  expect_close(g, dx, 0, 0, "in-place dropout backward");
}

std::vector<std::uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

// Dx::kOverwrite gives dx the bits of accumulating onto zeros whatever dx held (NaN here), +0
// included where a dropped negative gradient alone would give −0, in place too; dbias and
// dresidual still add.
TEST(OpsDropout, BiasDropoutAddBackwardOverwritesDxWhenAsked) {
  constexpr std::int64_t kRows = 6, kH = 5;
  auto dout = random_floats(kRows * kH, 6);
  const DropoutStream stream{0.4f, 11, 12};
  std::vector<float> want(dout.size(), 0.0f), dbias_want(kH, 1.0f), dres_want(dout.size(), 1.0f);
  bias_dropout_add_backward(view(want, {kRows, kH}), view(dbias_want, {kH}),
                            view(dres_want, {kRows, kH}), view(dout, {kRows, kH}), stream);
  int dropped_negative = 0;
  for (std::size_t i = 0; i < dout.size(); ++i) dropped_negative += want[i] == 0.0f && dout[i] < 0;
  ASSERT_GT(dropped_negative, 0) << "the case of 0 + (−0) is not exercised";

  std::vector<float> dx(dout.size(), std::numeric_limits<float>::quiet_NaN()), dbias(kH, 1.0f),
      dres(dout.size(), 1.0f);
  bias_dropout_add_backward(DeviceContext{}, view(dx, {kRows, kH}), view(dbias, {kH}),
                            view(dres, {kRows, kH}), view(dout, {kRows, kH}), stream,
                            Dx::kOverwrite);
  EXPECT_EQ(bits_of(dx), bits_of(want));
  EXPECT_EQ(dbias, dbias_want);
  EXPECT_EQ(dres, dres_want);
  auto in_place = dout;
  bias_dropout_add_backward(DeviceContext{}, view(in_place, {kRows, kH}), {}, {},
                            view(in_place, {kRows, kH}), stream, Dx::kOverwrite);
  EXPECT_EQ(bits_of(in_place), bits_of(want));
}

}  // namespace
}  // namespace mds::ops
