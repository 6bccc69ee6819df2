#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/gpt_config.h"
#include "model/param_buffer.h"
#include "model/param_table.h"

namespace mds::model {
namespace {

using tensor::Shape;

GptConfig gpt2_124m() {
  GptConfig c;
  c.num_layers = 12;
  c.hidden_size = 768;
  c.num_attention_heads = 12;
  c.seq_length = 1024;
  c.max_position_embeddings = 1024;
  c.padded_vocab_size = 50304;
  return c;
}

// checkpoints.md §2.7: L=2, h=8, n=2, F=32, Vp=5120, alibi, embed LN, T=2, P=2 with parts [0,4,9].
GptConfig inventory_config(std::int64_t first_spec, std::int64_t end_spec, std::int64_t tp_rank) {
  GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.ffn_hidden_size = 32;
  c.seq_length = 16;
  c.max_position_embeddings = 16;
  c.padded_vocab_size = 5120;
  c.position_embedding = PositionEmbedding::kAlibi;
  c.embed_layernorm = true;
  c.tensor_parallel_size = 2;
  c.tp_rank = tp_rank;
  c.stage_first_spec = first_spec;
  c.stage_end_spec = end_spec;
  return c;
}

struct Expected {
  std::int64_t layer;
  std::string name;
  Shape local;
};

void expect_params(const ParamTable& table, const std::vector<Expected>& expected) {
  ASSERT_EQ(table.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(table[i].layer, expected[i].layer) << i;
    EXPECT_EQ(table[i].name, expected[i].name) << i;
    EXPECT_EQ(table[i].local_shape, expected[i].local) << expected[i].name;
  }
}

std::vector<Expected> inventory_layer(std::int64_t spec) {
  return {{spec, "input_layernorm.weight", Shape{8}},
          {spec, "input_layernorm.bias", Shape{8}},
          {spec, "self_attention.query_key_value.weight", Shape{12, 8}},
          {spec, "self_attention.query_key_value.bias", Shape{12}},
          {spec, "self_attention.dense.weight", Shape{8, 4}},
          {spec, "self_attention.dense.bias", Shape{8}},
          {spec, "post_attention_layernorm.weight", Shape{8}},
          {spec, "post_attention_layernorm.bias", Shape{8}},
          {spec, "mlp.dense_h_to_4h.weight", Shape{16, 8}},
          {spec, "mlp.dense_h_to_4h.bias", Shape{16}},
          {spec, "mlp.dense_4h_to_h.weight", Shape{8, 16}},
          {spec, "mlp.dense_4h_to_h.bias", Shape{8}}};
}

std::vector<std::string> group_names(const ParamTable& table, DecayGroup group) {
  std::vector<std::string> names;
  for (const ParamSpec& p : table.params()) {
    if (p.group == group) names.push_back(p.engine_name());
  }
  return names;
}

TEST(ParamTable, InventoryFirstStage) {
  for (std::int64_t tp = 0; tp < 2; ++tp) {
    const ParamTable table = ParamTable::build(inventory_config(0, 4, tp));
    std::vector<Expected> expected = {{1, "word_embeddings.weight", Shape{2560, 8}},
                                      {1, "word_embeddings.norm.weight", Shape{8}},
                                      {1, "word_embeddings.norm.bias", Shape{8}}};
    for (Expected& e : inventory_layer(3)) expected.push_back(e);
    expect_params(table, expected);
    EXPECT_EQ(table.saved_layers(), (std::vector<std::int64_t>{1, 3}));
    EXPECT_EQ(layer_file_name(1, tp),
              tp == 0 ? "layer_01-model_00-model_states.pt" : "layer_01-model_01-model_states.pt");
  }
}

TEST(ParamTable, InventoryLastStageAndGroups) {
  const ParamTable table = ParamTable::build(inventory_config(4, 9, 1));
  std::vector<Expected> expected = {{1, "word_embeddings.weight", Shape{2560, 8}}};
  for (Expected& e : inventory_layer(4)) expected.push_back(e);
  expected.push_back({6, "weight", Shape{8}});
  expected.push_back({6, "bias", Shape{8}});
  expect_params(table, expected);
  EXPECT_TRUE(table[0].tied_replica);
  EXPECT_EQ(table.saved_layers(), (std::vector<std::int64_t>{4, 6}));
  EXPECT_EQ(layer_file_name(6, 1), "layer_06-model_01-model_states.pt");
  EXPECT_EQ(layer_file_name(104, 3), "layer_104-model_03-model_states.pt");

  // The decay list is split 2|3; no-decay keeps registration order (checkpoints.md §2.7).
  EXPECT_EQ(group_names(table, DecayGroup::kDecayFirstHalf),
            (std::vector<std::string>{"tied_modules.embed.word_embeddings.weight",
                                      "4.self_attention.query_key_value.weight"}));
  EXPECT_EQ(group_names(table, DecayGroup::kDecaySecondHalf),
            (std::vector<std::string>{"4.self_attention.dense.weight", "4.mlp.dense_h_to_4h.weight",
                                      "4.mlp.dense_4h_to_h.weight"}));
  EXPECT_EQ(group_names(table, DecayGroup::kNoDecay),
            (std::vector<std::string>{
                "4.input_layernorm.weight", "4.input_layernorm.bias",
                "4.self_attention.query_key_value.bias", "4.self_attention.dense.bias",
                "4.post_attention_layernorm.weight", "4.post_attention_layernorm.bias",
                "4.mlp.dense_h_to_4h.bias", "4.mlp.dense_4h_to_h.bias", "6.weight", "6.bias"}));
}

TEST(ParamTable, Gpt2SmallCountMatchesClosedForm) {
  const GptConfig c = gpt2_124m();
  const std::int64_t h = 768;
  const std::int64_t expected = 50304 * h + 1024 * h + 12 * (12 * h * h + 13 * h) + 2 * h;
  EXPECT_EQ(expected, 124475904);
  const ParamTable table = ParamTable::build(c);
  EXPECT_EQ(table.full_numel(), expected);
  EXPECT_EQ(table.local_numel(), expected);
  EXPECT_EQ(expected_full_parameter_count(c), expected);
  EXPECT_EQ(table.size(), 2u + 12u * 12u + 2u);
  EXPECT_EQ(table.saved_layers().size(), 14u);
  EXPECT_EQ(table[0].name, "word_embeddings.weight");
  EXPECT_EQ(table[1].name, "position_embeddings.weight");
  EXPECT_EQ(table[1].full_shape, (Shape{1024, 768}));
  EXPECT_EQ(table.params().back().layer, 16);
  EXPECT_EQ(table.params().back().name, "bias");
}

TEST(ParamTable, TensorParallelLocalShapes) {
  GptConfig c = gpt2_124m();
  c.tensor_parallel_size = 2;
  c.tp_rank = 1;
  const ParamTable table = ParamTable::build(c);
  const auto local = [&](std::int64_t layer, const char* name) {
    return table[table.index_of(layer, name)];
  };
  EXPECT_EQ(local(1, "word_embeddings.weight").local_shape, (Shape{25152, 768}));
  EXPECT_EQ(local(1, "word_embeddings.weight").split, TpSplit::kVocab);
  EXPECT_EQ(local(1, "position_embeddings.weight").local_shape, (Shape{1024, 768}));
  EXPECT_EQ(local(3, "input_layernorm.weight").split, TpSplit::kReplicated);
  EXPECT_EQ(local(3, "self_attention.query_key_value.weight").local_shape, (Shape{1152, 768}));
  EXPECT_EQ(local(3, "self_attention.query_key_value.weight").split, TpSplit::kColumn);
  EXPECT_EQ(local(3, "self_attention.query_key_value.bias").local_shape, (Shape{1152}));
  EXPECT_EQ(local(3, "self_attention.dense.weight").local_shape, (Shape{768, 384}));
  EXPECT_EQ(local(3, "self_attention.dense.weight").split, TpSplit::kRow);
  EXPECT_EQ(local(3, "self_attention.dense.bias").local_shape, (Shape{768}));
  EXPECT_EQ(local(3, "self_attention.dense.bias").split, TpSplit::kReplicated);
  EXPECT_EQ(local(14, "mlp.dense_h_to_4h.weight").local_shape, (Shape{1536, 768}));
  EXPECT_EQ(local(14, "mlp.dense_h_to_4h.bias").local_shape, (Shape{1536}));
  EXPECT_EQ(local(14, "mlp.dense_4h_to_h.weight").local_shape, (Shape{768, 1536}));
  EXPECT_EQ(local(14, "mlp.dense_4h_to_h.bias").split, TpSplit::kReplicated);
  EXPECT_EQ(local(16, "weight").local_shape, (Shape{768}));
  EXPECT_EQ(table.full_numel(), 124475904);
  EXPECT_LT(table.local_numel(), table.full_numel());
  EXPECT_FALSE(table.find(3, "no_such.weight").has_value());
  EXPECT_THROW(table.index_of(3, "no_such.weight"), base::Error);
}

TEST(ParamTable, GluDoublesFc1Rows) {
  GptConfig c = gpt2_124m();
  c.glu = true;
  c.tensor_parallel_size = 4;
  const ParamTable table = ParamTable::build(c);
  EXPECT_EQ(table[table.index_of(3, "mlp.dense_h_to_4h.weight")].local_shape, (Shape{1536, 768}));
  EXPECT_EQ(table.full_numel(), expected_full_parameter_count(c));
}

TEST(ParamTable, InitKinds) {
  const ParamTable table = ParamTable::build(gpt2_124m());
  const auto at = [&](std::int64_t layer, const char* name) {
    return table[table.index_of(layer, name)];
  };
  EXPECT_EQ(at(1, "word_embeddings.weight").init, InitKind::kNormal);
  EXPECT_DOUBLE_EQ(at(1, "word_embeddings.weight").init_std, 0.02);
  EXPECT_EQ(at(3, "self_attention.query_key_value.weight").init, InitKind::kNormal);
  EXPECT_EQ(at(3, "self_attention.dense.weight").init, InitKind::kScaledNormal);
  EXPECT_DOUBLE_EQ(at(3, "self_attention.dense.weight").init_std, 0.02 / std::sqrt(24.0));
  EXPECT_EQ(at(3, "mlp.dense_4h_to_h.weight").init, InitKind::kScaledNormal);
  EXPECT_EQ(at(3, "mlp.dense_h_to_4h.weight").init, InitKind::kNormal);
  EXPECT_EQ(at(3, "mlp.dense_h_to_4h.bias").init, InitKind::kZeros);
  EXPECT_EQ(at(3, "input_layernorm.weight").init, InitKind::kOnes);
  EXPECT_EQ(at(16, "bias").init, InitKind::kZeros);
}

TEST(ParamTable, WeightDecayGroupsSplitHalf) {
  const ParamTable table = ParamTable::build(gpt2_124m());
  // 2 embeddings + 4 weights per layer are decayed: 50 in all, split 25|25.
  EXPECT_EQ(group_names(table, DecayGroup::kDecayFirstHalf).size(), 25u);
  EXPECT_EQ(group_names(table, DecayGroup::kDecaySecondHalf).size(), 25u);
  EXPECT_EQ(group_names(table, DecayGroup::kNoDecay).size(), 12u * 8u + 2u);
  for (const ParamSpec& p : table.params()) {
    const bool no_decay =
        p.name.ends_with("bias") || p.name.find("layernorm") != std::string::npos || p.layer == 16;
    EXPECT_EQ(p.group == DecayGroup::kNoDecay, no_decay) << p.engine_name();
  }
}

TEST(ParamTable, GroupsAreContiguousAlignedSlices) {
  const ParamTable table = ParamTable::build(inventory_config(4, 9, 0));
  std::int64_t previous_end = 0;
  for (int g = 0; g < kNumDecayGroups; ++g) {
    const auto group = static_cast<DecayGroup>(g);
    EXPECT_EQ(table.group_begin(group), previous_end);
    for (const ParamSpec& p : table.params()) {
      if (p.group != group) continue;
      EXPECT_GE(p.offset, table.group_begin(group));
      EXPECT_LE(p.offset + p.local_numel(), table.group_end(group));
    }
    previous_end = table.group_end(group);
  }
  EXPECT_EQ(previous_end, table.buffer_numel());
}

TEST(ParamTable, BufferViewsAreAlignedAndDisjoint) {
  GptConfig c = inventory_config(0, -1, 0);
  const ParamTable table = ParamTable::build(c);
  for (tensor::DType dtype :
       {tensor::DType::kFloat32, tensor::DType::kBFloat16, tensor::DType::kFloat16}) {
    const ParamBuffer params(table, dtype);
    const ParamBuffer grads(table, dtype);
    const auto* base = static_cast<const std::byte*>(params.flat().raw());
    std::vector<bool> used(static_cast<std::size_t>(table.buffer_numel()), false);
    for (std::size_t i = 0; i < table.size(); ++i) {
      const tensor::Tensor view = params.view(i);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(view.raw()) % 64, 0u) << table[i].engine_name();
      EXPECT_EQ(view.shape(), table[i].local_shape);
      EXPECT_EQ(view.dtype(), dtype);
      // The gradient buffer mirrors the parameter buffer offset for offset.
      const auto offset = static_cast<const std::byte*>(view.raw()) - base;
      EXPECT_EQ(static_cast<const std::byte*>(grads.view(i).raw()) -
                    static_cast<const std::byte*>(grads.flat().raw()),
                offset);
      for (std::int64_t e = table[i].offset; e < table[i].offset + table[i].local_numel(); ++e) {
        EXPECT_FALSE(used[static_cast<std::size_t>(e)]);
        used[static_cast<std::size_t>(e)] = true;
      }
    }
  }
  const ParamBuffer fp32(table, tensor::DType::kFloat32);
  fp32.view(0).data<float>()[0] = 1.5f;
  EXPECT_EQ(fp32.flat().data<float>()[table[0].offset], 1.5f);
  EXPECT_THROW(fp32.view(table.size()), base::Error);
}

void expect_rejected(const GptConfig& c, const std::string& fragment) {
  try {
    validate(c);
    ADD_FAILURE() << "accepted; expected: " << fragment;
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
  EXPECT_THROW(ParamTable::build(c), base::Error);
}

TEST(GptConfig, AcceptsValidConfigs) {
  EXPECT_NO_THROW(validate(gpt2_124m()));
  EXPECT_NO_THROW(validate(inventory_config(4, 9, 1)));
  EXPECT_EQ(gpt2_124m().ffn(), 3072);
  EXPECT_EQ(gpt2_124m().head_dim(), 64);
  EXPECT_EQ(gpt2_124m().final_layernorm_spec(), 16);
}

TEST(GptConfig, RejectsInvalidConfigs) {
  GptConfig c = gpt2_124m();
  c.num_layers = 0;
  expect_rejected(c, "num_layers must be positive, got 0");
  c = gpt2_124m();
  c.num_attention_heads = 7;
  expect_rejected(c, "hidden_size 768 is not divisible by num_attention_heads 7");
  c = gpt2_124m();
  c.tensor_parallel_size = 8;
  expect_rejected(c, "num_attention_heads 12 is not divisible by tensor_parallel_size 8");
  c = gpt2_124m();
  c.tensor_parallel_size = 4;
  c.padded_vocab_size = 50258;
  expect_rejected(c, "padded_vocab_size 50258 is not divisible by tensor_parallel_size 4");
  c = gpt2_124m();
  c.ffn_hidden_size = 3070;
  c.tensor_parallel_size = 4;
  expect_rejected(c, "ffn_hidden_size 3070 is not divisible by tensor_parallel_size 4");
  c = gpt2_124m();
  c.tensor_parallel_size = 2;
  c.tp_rank = 2;
  expect_rejected(c, "tp_rank 2 is outside [0, 2)");
  c = gpt2_124m();
  c.seq_length = 2048;
  expect_rejected(c, "max_position_embeddings 1024 is below seq_length 2048");
  c = gpt2_124m();
  c.stage_first_spec = 5;
  c.stage_end_spec = 5;
  expect_rejected(c, "stage spec range [5, 5) is not inside [0, 19)");
  c = gpt2_124m();
  c.init_method_std = 0.0;
  expect_rejected(c, "init_method_std must be positive");
}

}  // namespace
}  // namespace mds::model
