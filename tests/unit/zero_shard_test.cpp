// ZeroShard's fused Adam + publish (the 16-bit weights rounded in the AdamW pass) against the
// separate step and publish it replaces, bit for bit, for bf16, fp16 and fp32 weights; and its
// per-group sum of squares against one ops::sum_of_squares per fragment.
#include "train/zero_shard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "model/gpt_config.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "ops/adam.h"
#include "ops/elementwise.h"

namespace mds::train {
namespace {

using model::ParamBuffer;
using model::ParamTable;
using tensor::DType;

ParamTable small_table() {
  model::GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.seq_length = 8;
  c.max_position_embeddings = 8;
  c.padded_vocab_size = 128;
  return ParamTable::build(c);
}

void fill_random(tensor::Tensor x, std::uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  float* v = x.data<float>();
  for (std::int64_t i = 0; i < x.numel(); ++i) v[i] = dist(gen);
}

// An fp32 partition buffer of the shard's layout.
struct Partitions {
  explicit Partitions(const ZeroShard& shard)
      : values(static_cast<std::size_t>(shard.layout().partition_numel())) {}
  tensor::Tensor tensor() {
    return {values.data(), DType::kFloat32, {static_cast<std::int64_t>(values.size())}};
  }
  std::vector<float> values;
};

// Both shards start from the same master and moments.
void same_state(ZeroShard& a, ZeroShard& b, std::uint32_t seed) {
  fill_random(a.master(), seed, 0.02f);
  fill_random(a.exp_avg(), seed + 1, 1e-3f);
  fill_random(a.exp_avg_sq(), seed + 2, 1e-6f);
  float* v = a.exp_avg_sq().data<float>();
  for (std::int64_t i = 0; i < a.exp_avg_sq().numel(); ++i) v[i] = std::abs(v[i]);  // v >= 0
  for (const auto& [to, from] :
       {std::pair{b.master(), a.master()}, std::pair{b.exp_avg(), a.exp_avg()},
        std::pair{b.exp_avg_sq(), a.exp_avg_sq()}}) {
    ops::cast(to, from);
  }
}

std::vector<unsigned char> bytes(const tensor::Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.raw());
  return std::vector<unsigned char>(p, p + t.bytes());
}

ShardAdamStep adam_at(std::int64_t step) {
  return {1e-3, 0.9, 0.95, 1e-8, 0.1, step};
}

TEST(ZeroShard, FusedAdamAndPublishEqualsTheStepThenPublish) {
  const ParamTable table = small_table();
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    SCOPED_TRACE(tensor::dtype_name(dtype));
    CollectiveStaging staging(kDefaultCollectiveChunk, tensor::Device{});
    ZeroShard fused(table, nullptr, staging), separate(table, nullptr, staging);
    ParamBuffer fused_params(table, dtype), separate_params(table, dtype);
    Partitions grads(fused);
    for (std::int64_t step = 1; step <= 3; ++step) {
      same_state(fused, separate, static_cast<std::uint32_t>(10 * step));
      fill_random(grads.tensor(), static_cast<std::uint32_t>(10 * step + 3), 0.1f);
      fused.adam_step_and_publish(grads.tensor(), adam_at(step), fused_params.flat());
      separate.adam_step(grads.tensor(), adam_at(step));
      separate.publish(separate_params.flat());
      EXPECT_EQ(bytes(fused_params.flat()), bytes(separate_params.flat())) << "step " << step;
      EXPECT_EQ(bytes(fused.master()), bytes(separate.master()));
      EXPECT_EQ(bytes(fused.exp_avg()), bytes(separate.exp_avg()));
      EXPECT_EQ(bytes(fused.exp_avg_sq()), bytes(separate.exp_avg_sq()));
    }
  }
}

TEST(ZeroShard, GroupSumOfSquaresAddsEachFragmentsSumInOrder) {
  const ParamTable table = small_table();
  CollectiveStaging staging(kDefaultCollectiveChunk, tensor::Device{});
  ZeroShard shard(table, nullptr, staging);
  Partitions partitions(shard);
  fill_random(partitions.tensor(), 5, 0.3f);
  for (std::size_t g = 0; g < shard.layout().size(); ++g) {
    double want = 0.0;
    const tensor::Tensor grads = shard.group_slice(partitions.tensor(), g);
    for (const ZeroFragment& f : shard.layout()[g].fragments[0]) {
      const model::ParamSpec& param = table[f.param];
      if (param.tied_replica || !table.counts_in_norm(param)) continue;
      want += ops::sum_of_squares(grads.narrow(f.hp_start, f.numel));
    }
    EXPECT_GT(want, 0.0);
    EXPECT_EQ(shard.group_sum_of_squares(partitions.tensor(), g), want) << "group " << g;
  }
}

}  // namespace
}  // namespace mds::train
