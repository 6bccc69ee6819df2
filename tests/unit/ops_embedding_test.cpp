#include <gtest/gtest.h>

#include "base/error.h"
#include "ops/embedding.h"
#include "ops_test_util.h"

namespace mds::ops {
namespace {

using ops_test::expect_close;
using ops_test::numeric_grad;
using ops_test::random_floats;
using ops_test::view;
using ops_test::weighted_sum;

constexpr std::int64_t kV = 7, kP = 5, kH = 4, kB = 2, kS = 3;

TEST(OpsEmbedding, ForwardAddsTokenAndPositionRows) {
  auto wte = random_floats(kV * kH, 1), wpe = random_floats(kP * kH, 2);
  std::vector<std::int64_t> tokens{6, 0, 3, 3, 1, 6}, pos{0, 1, 2, 0, 1, 2};
  std::vector<float> out(kB * kS * kH);
  embedding_forward(view(out, {kB, kS, kH}), view(tokens, {kB, kS}), view(wte, {kV, kH}),
                    view(pos, {kB, kS}), view(wpe, {kP, kH}));
  for (int t = 0; t < kB * kS; ++t) {
    for (int c = 0; c < kH; ++c) {
      EXPECT_FLOAT_EQ(out[t * kH + c], wte[tokens[t] * kH + c] + wpe[pos[t] * kH + c]);
    }
  }
}

TEST(OpsEmbedding, BackwardScatterAddsMatchFiniteDifferences) {
  auto wte = random_floats(kV * kH, 3), wpe = random_floats(kP * kH, 4);
  std::vector<std::int64_t> tokens{6, 0, 3, 3, 1, 6}, pos{0, 1, 2, 0, 1, 2};
  auto dout = random_floats(kB * kS * kH, 5);
  auto loss = [&] {
    std::vector<float> out(kB * kS * kH);
    embedding_forward(view(out, {kB, kS, kH}), view(tokens, {kB, kS}), view(wte, {kV, kH}),
                      view(pos, {kB, kS}), view(wpe, {kP, kH}));
    return weighted_sum(out, dout);
  };
  std::vector<float> dwte(wte.size()), dwpe(wpe.size());
  embedding_backward(view(dwte, {kV, kH}), view(dout, {kB, kS, kH}), view(tokens, {kB, kS}));
  embedding_backward(view(dwpe, {kP, kH}), view(dout, {kB, kS, kH}), view(pos, {kB, kS}));
  expect_close(dwte, numeric_grad(wte, loss), 1e-3, 1e-3, "dwte");
  expect_close(dwpe, numeric_grad(wpe, loss), 1e-3, 1e-3, "dwpe");
}

TEST(OpsEmbedding, VocabShardsSumToTheFullLookup) {
  auto wte = random_floats(kV * kH, 6);
  std::vector<std::int64_t> tokens{6, 0, 3, 3, 1, 6};
  std::vector<float> full(kB * kS * kH), sum(full.size(), 0.0f);
  embedding_lookup(view(full, {kB * kS, kH}), view(tokens, {kB * kS}), view(wte, {kV, kH}));
  for (const std::int64_t start : {0, 4}) {
    const std::int64_t rows = start == 0 ? 4 : kV - 4;
    std::vector<float> shard(wte.begin() + start * kH, wte.begin() + (start + rows) * kH);
    std::vector<float> part(full.size(), 9.0f);
    embedding_lookup(view(part, {kB * kS, kH}), view(tokens, {kB * kS}), view(shard, {rows, kH}),
                     start, kV);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
  }
  expect_close(sum, full, 0, 0, "sharded lookup");
}

TEST(OpsEmbedding, RejectsIdsOutsideTheVocabulary) {
  std::vector<float> wte(kV * kH), out(kH);
  std::vector<std::int64_t> id{kV};
  EXPECT_THROW(embedding_lookup(view(out, {1, kH}), view(id, {1}), view(wte, {kV, kH})),
               base::Error);
  id[0] = -1;
  EXPECT_THROW(embedding_lookup(view(out, {1, kH}), view(id, {1}), view(wte, {kV, kH})),
               base::Error);
}

}  // namespace
}  // namespace mds::ops
