// The tensor-parallel rules of merge-mp-partitions: split is the inverse of merge, each TP rank
// gets its blocks of training.md §2.2, replicated parameters must agree, the vocabulary is cut or
// zero-padded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "ckpt/reshard_tp.h"
#include "model/init.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/pipeline_partition.h"
#include "model/tp_merge.h"

namespace mds::ckpt {
namespace {

using model::GptConfig;
using model::ParamBuffer;
using model::ParamTable;
using tensor::DType;

GptConfig config(std::int64_t tp, std::int64_t rank, std::int64_t vocab = 64) {
  GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 4;
  c.ffn_hidden_size = 32;
  c.seq_length = 8;
  c.max_position_embeddings = 8;
  c.padded_vocab_size = vocab;
  c.tensor_parallel_size = tp;
  c.tp_rank = rank;
  return c;
}

bool same_bytes(const tensor::Tensor& a, const tensor::Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// Whether every parameter holds the same bytes (the alignment gaps between them do not count).
bool same_params(const ParamBuffer& a, const ParamBuffer& b) {
  for (std::size_t p = 0; p < a.table().size(); ++p) {
    if (!same_bytes(a.view(p), b.view(p))) return false;
  }
  return true;
}

// Every element a different value: its flat position in the buffer.
void fill_distinct(const ParamBuffer& buffer) {
  float* data = static_cast<float*>(buffer.flat().raw());
  for (std::int64_t i = 0; i < buffer.flat().numel(); ++i) data[i] = static_cast<float>(i) + 0.5f;
}

// Initial weights are drawn per element of the unsharded tensor (model/init.h), so the split of
// the T = 1 initial weights must be each shard's own initial weights, on any pipeline stage.
TEST(ReshardTp, SplitOfTheInitialWeightsGivesEachShardsInitialWeights) {
  const ParamTable whole_table = ParamTable::build(config(1, 0));
  ParamBuffer whole(whole_table, DType::kFloat32);
  model::initialize_parameters(whole, 5);
  for (const std::int64_t tp : {1, 2, 4}) {
    for (const std::int64_t stages : {1, 2}) {
      GptConfig c = config(tp, 0);
      const std::vector<std::int64_t> parts =
          model::pipeline_partition(c, false, stages, "type:transformer");
      for (std::int64_t rank = 0; rank < tp; ++rank) {
        for (std::int64_t stage = 0; stage < stages; ++stage) {
          GptConfig shard_config = config(tp, rank);
          model::set_stage_specs(shard_config, parts, stage);
          const ParamTable table = ParamTable::build(shard_config);
          ParamBuffer split(table, DType::kFloat32), expected(table, DType::kFloat32);
          model::split_tp_shard(whole, tp, split);
          model::initialize_parameters(expected, 5);
          for (std::size_t p = 0; p < table.size(); ++p) {
            EXPECT_TRUE(same_bytes(split.view(p), expected.view(p)))
                << "T=" << tp << " rank " << rank << " stage " << stage << " "
                << table[p].engine_name();
          }
        }
      }
    }
  }
}

TEST(ReshardTp, MergeOfTheSplitGivesBackEveryElement) {
  const ParamTable whole_table = ParamTable::build(config(1, 0));
  ParamBuffer whole(whole_table, DType::kFloat32);
  fill_distinct(whole);
  for (const std::int64_t tp : {2, 4}) {
    ParamBuffer merged(whole_table, DType::kFloat32);
    for (std::int64_t rank = 0; rank < tp; ++rank) {
      const ParamTable table = ParamTable::build(config(tp, rank));
      ParamBuffer shard(table, DType::kFloat32);
      model::split_tp_shard(whole, tp, shard);
      model::merge_tp_shard(shard, tp, merged);
    }
    EXPECT_TRUE(same_params(whole, merged)) << "T=" << tp;
  }
}

// Element (r, c) of the unsharded tensor, filled with 1000·r + c.
float at(const ParamBuffer& b, std::size_t param, std::int64_t r, std::int64_t c) {
  const tensor::Tensor t = b.view(param);
  const std::int64_t cols = t.shape().rank() > 1 ? t.dim(1) : 1;
  return t.host_span<float>()[static_cast<std::size_t>(r * cols + c)];
}

TEST(ReshardTp, EachRankGetsItsRowsColumnsOrTheWholeTensor) {
  const ParamTable whole_table = ParamTable::build(config(1, 0));
  ParamBuffer whole(whole_table, DType::kFloat32);
  for (std::size_t p = 0; p < whole_table.size(); ++p) {
    const tensor::Tensor t = whole.view(p);
    const std::int64_t cols = t.shape().rank() > 1 ? t.dim(1) : 1;
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      t.host_span<float>()[static_cast<std::size_t>(i)] =
          static_cast<float>(1000 * (i / cols) + i % cols);
    }
  }
  const ParamTable table = ParamTable::build(config(2, 1));
  ParamBuffer shard(table, DType::kFloat32);
  model::split_tp_shard(whole, 2, shard);
  const auto index = [&](std::int64_t layer, const char* name) {
    return table.index_of(layer, name);
  };
  // Column-parallel QKV [3h/2, h]: rank 1 holds rows 24..47 (heads 2 and 3).
  EXPECT_EQ(at(shard, index(3, "self_attention.query_key_value.weight"), 0, 5), 24005.0f);
  EXPECT_EQ(at(shard, index(3, "self_attention.query_key_value.bias"), 23, 0), 47000.0f);
  // Row-parallel dense [h, h/2]: rank 1 holds columns 8..15.
  EXPECT_EQ(at(shard, index(4, "self_attention.dense.weight"), 3, 0), 3008.0f);
  EXPECT_EQ(at(shard, index(4, "mlp.dense_4h_to_h.weight"), 15, 15), 15031.0f);
  // Vocabulary [Vp/2, h]: rows 32..63; replicated tensors whole.
  EXPECT_EQ(at(shard, index(1, "word_embeddings.weight"), 0, 1), 32001.0f);
  EXPECT_EQ(at(shard, index(1, "position_embeddings.weight"), 7, 15), 7015.0f);
  EXPECT_EQ(at(shard, index(4, "mlp.dense_4h_to_h.bias"), 15, 0), 15000.0f);
  EXPECT_EQ(at(shard, index(6, "weight"), 9, 0), 9000.0f);
}

TEST(ReshardTp, ReplicasMustBeBitIdenticalAcrossRanks) {
  const ParamTable table0 = ParamTable::build(config(2, 0));
  const ParamTable table1 = ParamTable::build(config(2, 1));
  ParamBuffer rank0(table0, DType::kBFloat16), rank1(table1, DType::kBFloat16);
  model::initialize_parameters(rank0, 9);
  model::initialize_parameters(rank1, 9);
  const auto in_layer_file = [](const model::ParamSpec& spec) {
    return "ckpt/global_step3/" + model::layer_file_name(spec.layer, 1);
  };
  EXPECT_NO_THROW(check_tp_replicas_equal(rank0, rank1, in_layer_file));

  const tensor::Tensor ln = rank1.view(table1.index_of(3, "post_attention_layernorm.bias"));
  static_cast<std::uint16_t*>(ln.raw())[4] ^= 1;  // one bit of one element
  std::string message;
  try {
    check_tp_replicas_equal(rank0, rank1, in_layer_file);
  } catch (const base::Error& e) {
    message = e.what();
  }
  EXPECT_EQ(message.rfind("ckpt/global_step3/layer_03-model_01-model_states.pt: "
                          "post_attention_layernorm.bias differs from TP rank 0's copy in 1 of "
                          "16 elements",
                          0),
            0u)
      << message;
}

TEST(ReshardTp, VocabularyRowsAreCutOrZeroPadded) {
  const ParamTable small_table = ParamTable::build(config(1, 0, 64));
  const ParamTable large_table = ParamTable::build(config(1, 0, 96));
  ParamBuffer small(small_table, DType::kFloat32), large(large_table, DType::kFloat32);
  ParamBuffer back(small_table, DType::kFloat32);
  fill_distinct(small);
  copy_resizing_vocabulary(small, large);
  copy_resizing_vocabulary(large, back);
  EXPECT_TRUE(same_params(small, back));  // pad then cut: the round trip of TP 1→2→1

  const std::size_t words = large_table.index_of(1, "word_embeddings.weight");
  const std::span<float> rows = large.view(words).host_span<float>();
  const std::span<float> original = small.view(words).host_span<float>();
  EXPECT_TRUE(std::equal(original.begin(), original.end(), rows.begin()));
  EXPECT_TRUE(std::all_of(rows.begin() + 64 * 16, rows.end(), [](float v) { return v == 0.0f; }));
  for (std::size_t p = 0; p < small_table.size(); ++p) {
    if (p == words) continue;
    EXPECT_TRUE(same_bytes(small.view(p), large.view(large_table.index_of(small_table[p].layer,
                                                                          small_table[p].name))));
  }
}

TEST(ReshardTp, VocabularyResizeRefusesAnotherModel) {
  GptConfig wider = config(1, 0);
  wider.hidden_size = 32;
  const ParamTable a_table = ParamTable::build(config(1, 0));
  const ParamTable b_table = ParamTable::build(wider);
  ParamBuffer a(a_table, DType::kFloat32), b(b_table, DType::kFloat32);
  EXPECT_THROW(copy_resizing_vocabulary(a, b), base::Error);
}

}  // namespace
}  // namespace mds::ckpt
