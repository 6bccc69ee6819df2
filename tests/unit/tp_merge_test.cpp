#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "model/init.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/tp_merge.h"

namespace mds::model {
namespace {

using tensor::DType;

GptConfig config(std::int64_t tp, std::int64_t rank) {
  GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.num_attention_heads = 4;
  c.seq_length = 8;
  c.max_position_embeddings = 16;
  c.padded_vocab_size = 512;
  c.tensor_parallel_size = tp;
  c.tp_rank = rank;
  return c;
}

// Initialization draws every element of the unsharded tensor from its own counter, so merging the
// shards of a TP run's initial weights must give the T = 1 initial weights exactly: that checks
// the merge against the split of ParamTable and init for every parameter kind.
TEST(TpMerge, ShardsOfTheInitialWeightsMergeIntoTheUnshardedOnes) {
  const ParamTable whole_table = ParamTable::build(config(1, 0));
  ParamBuffer whole(whole_table, DType::kFloat32);
  initialize_parameters(whole, 77);
  for (const std::int64_t tp : {2, 4}) {
    ParamBuffer merged(whole_table, DType::kFloat32);
    for (std::int64_t rank = 0; rank < tp; ++rank) {
      const ParamTable shard_table = ParamTable::build(config(tp, rank));
      ParamBuffer shard(shard_table, DType::kFloat32);
      initialize_parameters(shard, 77);
      merge_tp_shard(shard, tp, merged);
    }
    for (std::size_t p = 0; p < whole_table.size(); ++p) {
      const tensor::Tensor a = whole.view(p), b = merged.view(p);
      EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<std::size_t>(a.numel()) * 4), 0)
          << "T=" << tp << " " << whole_table[p].engine_name();
    }
  }
}

TEST(TpMerge, RefusesAFullModelOfAnotherShape) {
  GptConfig other = config(1, 0);
  other.padded_vocab_size = 1024;
  const ParamTable other_table = ParamTable::build(other);
  ParamBuffer full(other_table, DType::kFloat32);
  const ParamTable shard_table = ParamTable::build(config(2, 1));
  ParamBuffer shard(shard_table, DType::kFloat32);
  EXPECT_THROW(merge_tp_shard(shard, 2, full), base::Error);
}

}  // namespace
}  // namespace mds::model
