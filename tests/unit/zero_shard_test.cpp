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

// Both shards start from the same master, moments and gradients.
void same_state(ZeroShard& a, ZeroShard& b, std::uint32_t seed) {
  fill_random(a.master(), seed, 0.02f);
  fill_random(a.exp_avg(), seed + 1, 1e-3f);
  fill_random(a.exp_avg_sq(), seed + 2, 1e-6f);
  float* v = a.exp_avg_sq().data<float>();
  for (std::int64_t i = 0; i < a.exp_avg_sq().numel(); ++i) v[i] = std::abs(v[i]);  // v >= 0
  fill_random(a.grads(), seed + 3, 0.1f);
  for (const auto& [to, from] :
       {std::pair{b.master(), a.master()}, std::pair{b.exp_avg(), a.exp_avg()},
        std::pair{b.exp_avg_sq(), a.exp_avg_sq()}, std::pair{b.grads(), a.grads()}}) {
    ops::cast(to, from);
  }
}

TEST(ZeroShard, FusedAdamAndPublishEqualsTheStepThenPublish) {
  const ParamTable table = small_table();
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    SCOPED_TRACE(tensor::dtype_name(dtype));
    ZeroShard fused(table, nullptr), separate(table, nullptr);
    ParamBuffer fused_params(table, dtype), separate_params(table, dtype);
    for (std::int64_t step = 1; step <= 3; ++step) {
      same_state(fused, separate, static_cast<std::uint32_t>(10 * step));
      fused.adam_step_and_publish(1e-3, 0.9, 0.95, 1e-8, 0.1, step, fused_params.flat());
      separate.adam_step(1e-3, 0.9, 0.95, 1e-8, 0.1, step);
      separate.publish(separate_params.flat());
      const auto bytes = [](const tensor::Tensor& t) {
        const auto* p = static_cast<const unsigned char*>(t.raw());
        return std::vector<unsigned char>(p, p + t.bytes());
      };
      EXPECT_EQ(bytes(fused_params.flat()), bytes(separate_params.flat())) << "step " << step;
      EXPECT_EQ(bytes(fused.master()), bytes(separate.master()));
      EXPECT_EQ(bytes(fused.exp_avg()), bytes(separate.exp_avg()));
      EXPECT_EQ(bytes(fused.exp_avg_sq()), bytes(separate.exp_avg_sq()));
    }
  }
}

TEST(ZeroShard, GroupSumOfSquaresAddsEachFragmentsSumInOrder) {
  const ParamTable table = small_table();
  ZeroShard shard(table, nullptr);
  fill_random(shard.grads(), 5, 0.3f);
  for (std::size_t g = 0; g < shard.layout().size(); ++g) {
    double want = 0.0;
    const tensor::Tensor grads = shard.group_slice(shard.grads(), g);
    for (const ZeroFragment& f : shard.layout()[g].fragments[0]) {
      const model::ParamSpec& param = table[f.param];
      if (param.tied_replica || !table.counts_in_norm(param)) continue;
      want += ops::sum_of_squares(grads.narrow(f.hp_start, f.numel));
    }
    EXPECT_GT(want, 0.0);
    EXPECT_EQ(shard.group_sum_of_squares(g), want) << "group " << g;
  }
}

}  // namespace
}  // namespace mds::train
