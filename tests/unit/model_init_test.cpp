#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "model/init.h"
#include "model/param_buffer.h"
#include "model/param_table.h"

namespace mds::model {
namespace {

using tensor::DType;

GptConfig config(std::int64_t tp = 1, std::int64_t rank = 0) {
  GptConfig c;
  c.num_layers = 4;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.seq_length = 16;
  c.max_position_embeddings = 64;
  c.padded_vocab_size = 1024;
  c.init_method_std = 0.02;
  c.tensor_parallel_size = tp;
  c.tp_rank = rank;
  return c;
}

std::vector<float> values(const ParamBuffer& buffer, std::size_t index) {
  const auto span = buffer.view(index).host_span<float>();
  return {span.begin(), span.end()};
}

struct Moments {
  double mean, std_dev, within_one_sigma;
};

Moments moments(const std::vector<float>& v, double sigma) {
  double sum = 0.0, squares = 0.0, inside = 0.0;
  for (const float x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  for (const float x : v) {
    squares += (x - mean) * (x - mean);
    inside += std::fabs(x) < sigma ? 1.0 : 0.0;
  }
  return {mean, std::sqrt(squares / static_cast<double>(v.size())),
          inside / static_cast<double>(v.size())};
}

TEST(ModelInit, FollowsTheUpstreamDistribution) {
  const ParamTable table = ParamTable::build(config());
  ParamBuffer params(table, DType::kFloat32);
  initialize_parameters(params, 1234);
  const double sigma = 0.02, scaled = 0.02 / std::sqrt(2.0 * 4);
  int normal_tensors = 0, scaled_tensors = 0;
  for (std::size_t p = 0; p < table.size(); ++p) {
    const ParamSpec& spec = table[p];
    const std::vector<float> v = values(params, p);
    switch (spec.init) {
      case InitKind::kOnes:
        for (const float x : v) ASSERT_EQ(x, 1.0f) << spec.engine_name();
        break;
      case InitKind::kZeros:
        for (const float x : v) ASSERT_EQ(x, 0.0f) << spec.engine_name();
        break;
      case InitKind::kNormal:
      case InitKind::kScaledNormal: {
        const double want = spec.init == InitKind::kNormal ? sigma : scaled;
        EXPECT_DOUBLE_EQ(spec.init_std, want) << spec.engine_name();
        (spec.init == InitKind::kNormal ? normal_tensors : scaled_tensors)++;
        const Moments m = moments(v, want);
        const double n = static_cast<double>(v.size());
        // Five standard errors of the mean and of the standard deviation.
        EXPECT_LT(std::fabs(m.mean), 5.0 * want / std::sqrt(n)) << spec.engine_name();
        EXPECT_NEAR(m.std_dev / want, 1.0, 5.0 / std::sqrt(2.0 * n)) << spec.engine_name();
        // A normal puts 68.27 % within one σ (checks the shape, not only two moments).
        EXPECT_NEAR(m.within_one_sigma, 0.6827, 5.0 * 0.4654 / std::sqrt(n)) << spec.engine_name();
        break;
      }
    }
  }
  EXPECT_EQ(normal_tensors, 2 + 2 * 4);  // word, position; QKV and h→4h of each layer
  EXPECT_EQ(scaled_tensors, 2 * 4);      // attention dense and 4h→h of each layer
}

TEST(ModelInit, DeterministicPerSeedAndDistinctPerParameter) {
  const ParamTable table = ParamTable::build(config());
  ParamBuffer a(table, DType::kFloat32), b(table, DType::kFloat32), c(table, DType::kFloat32);
  initialize_parameters(a, 42);
  initialize_parameters(b, 42);
  initialize_parameters(c, 43);
  const auto fa = a.flat().host_span<float>(), fb = b.flat().host_span<float>(),
             fc = c.flat().host_span<float>();
  EXPECT_EQ(std::memcmp(fa.data(), fb.data(), fa.size_bytes()), 0);
  std::size_t differ = 0, nonzero = 0;
  for (std::size_t i = 0; i < fa.size(); ++i) {
    nonzero += fa[i] != 0.0f && fa[i] != 1.0f;
    differ += fa[i] != fc[i];
  }
  EXPECT_GT(nonzero, fa.size() / 2);
  EXPECT_EQ(differ, nonzero);  // every random value changes with the seed

  // Two layers' QKV weights are different draws.
  const std::vector<float> qkv0 =
      values(a, table.index_of(3, "self_attention.query_key_value.weight"));
  const std::vector<float> qkv1 =
      values(a, table.index_of(4, "self_attention.query_key_value.weight"));
  std::size_t same = 0;
  for (std::size_t i = 0; i < qkv0.size(); ++i) same += qkv0[i] == qkv1[i];
  EXPECT_EQ(same, 0u);
}

// The values depend on the parameter and the element, not on where the buffer holds them: a
// pipeline stage (with the tied embedding copy) and each TP shard see the whole model's values.
TEST(ModelInit, IndependentOfStageAndTensorParallelSplit) {
  const ParamTable whole_table = ParamTable::build(config());
  ParamBuffer whole(whole_table, DType::kFloat32);
  initialize_parameters(whole, 9);

  GptConfig last_stage = config();
  last_stage.stage_first_spec = 5;  // layers 2, 3 and the head
  const ParamTable stage_table = ParamTable::build(last_stage);
  ParamBuffer stage(stage_table, DType::kFloat32);
  initialize_parameters(stage, 9);
  for (std::size_t p = 0; p < stage_table.size(); ++p) {
    const ParamSpec& spec = stage_table[p];
    EXPECT_EQ(values(stage, p), values(whole, whole_table.index_of(spec.layer, spec.name)))
        << spec.engine_name();
  }

  for (std::int64_t rank = 0; rank < 2; ++rank) {
    const ParamTable shard_table = ParamTable::build(config(2, rank));
    ParamBuffer shard(shard_table, DType::kFloat32);
    initialize_parameters(shard, 9);  // the table says rank
    for (std::size_t p = 0; p < shard_table.size(); ++p) {
      const ParamSpec& spec = shard_table[p];
      const std::vector<float> full = values(whole, whole_table.index_of(spec.layer, spec.name));
      const std::vector<float> local = values(shard, p);
      const std::int64_t rows = spec.local_shape[0];
      const std::int64_t cols = spec.local_shape.rank() > 1 ? spec.local_shape[1] : 1;
      const std::int64_t full_cols = spec.full_shape.rank() > 1 ? spec.full_shape[1] : 1;
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t col = 0; col < cols; ++col) {
          std::int64_t at = r * full_cols + col;
          if (spec.split == TpSplit::kColumn || spec.split == TpSplit::kVocab)
            at += rank * rows * cols;
          if (spec.split == TpSplit::kRow) at += rank * cols;
          ASSERT_EQ(local[static_cast<std::size_t>(r * cols + col)],
                    full[static_cast<std::size_t>(at)])
              << spec.engine_name() << " rank " << rank;
        }
      }
    }
  }
}

TEST(ModelInit, HalfPrecisionBuffersHoldTheRoundedValues) {
  const ParamTable table = ParamTable::build(config());
  ParamBuffer fp32(table, DType::kFloat32), bf16(table, DType::kBFloat16);
  initialize_parameters(fp32, 5);
  initialize_parameters(bf16, 5);
  const auto f = fp32.flat().host_span<float>();
  const auto h = bf16.flat().host_span<tensor::BFloat16>();
  for (std::size_t i = 0; i < f.size(); ++i) ASSERT_EQ(h[i].bits, tensor::to_bfloat16(f[i]).bits);
  ParamBuffer int_buffer(table, DType::kInt32);
  EXPECT_THROW(initialize_parameters(int_buffer, 5), base::Error);
}

}  // namespace
}  // namespace mds::model
