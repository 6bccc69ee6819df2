#include "train/zero_partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/gpt_config.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "ops/device_context.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace mds::train {
namespace {

using model::DecayGroup;
using model::GptConfig;
using model::ParamTable;
using tensor::DType;
using tensor::Tensor;

// training.md §10 "Flat partition example": L=2, h=8, n=2, F=32, Vp=5120, alibi, embed LN, T=P=1.
GptConfig example_config() {
  GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.ffn_hidden_size = 32;
  c.seq_length = 16;
  c.max_position_embeddings = 16;
  c.padded_vocab_size = 5120;
  c.position_embedding = model::PositionEmbedding::kAlibi;
  c.embed_layernorm = true;
  return c;
}

// Odd sizes so that groups need padding: h=10, 5 heads, F=21, 1001 rows, absolute positions.
GptConfig odd_config() {
  GptConfig c;
  c.num_layers = 3;
  c.hidden_size = 10;
  c.num_attention_heads = 5;
  c.ffn_hidden_size = 21;
  c.seq_length = 7;
  c.max_position_embeddings = 9;
  c.padded_vocab_size = 1001;
  return c;
}

std::vector<GptConfig> invariant_configs() {
  std::vector<GptConfig> configs{example_config(), odd_config()};
  GptConfig tp = example_config();  // TP rank 1 of 2
  tp.tensor_parallel_size = 2;
  tp.tp_rank = 1;
  configs.push_back(tp);
  GptConfig last_stage = odd_config();  // the last pipeline stage: a layer, final LN, tied replica
  last_stage.stage_first_spec = 5;
  configs.push_back(last_stage);
  GptConfig glu = odd_config();
  glu.glu = true;
  glu.position_embedding = model::PositionEmbedding::kRotary;
  glu.hidden_size = 6;
  glu.num_attention_heads = 1;
  configs.push_back(glu);
  // A stage holding only the final LayerNorm: 20 elements, so at D = 8 (partitions of 4) the
  // padding of 12 spans three whole partitions.
  GptConfig final_norm = odd_config();
  final_norm.stage_first_spec = final_norm.final_layernorm_spec();
  final_norm.stage_end_spec = final_norm.stage_first_spec + 1;
  configs.push_back(final_norm);
  return configs;
}

constexpr float kGapSentinel = -7.0f;

// Parameter elements numbered 1, 2, ... in table order; the 64-element gaps hold a sentinel.
void fill_numbered(const ParamTable& table, Tensor flat) {
  float* data = flat.data<float>();
  for (std::int64_t i = 0; i < table.buffer_numel(); ++i) data[i] = kGapSentinel;
  float next = 1.0f;
  for (const model::ParamSpec& param : table.params()) {
    for (std::int64_t k = 0; k < param.local_numel(); ++k) data[param.offset + k] = next++;
  }
}

// The upstream flat group built directly: parameters back to back, then zeros.
std::vector<float> reference_flat_group(const ZeroLayout& layout, const ZeroGroup& group,
                                        const float* buffer) {
  std::vector<float> flat;
  for (const std::size_t i : group.params) {
    const model::ParamSpec& param = layout.table()[i];
    flat.insert(flat.end(), buffer + param.offset, buffer + param.offset + param.local_numel());
  }
  flat.resize(static_cast<std::size_t>(group.aligned_numel), 0.0f);
  return flat;
}

Tensor vector_tensor(std::vector<float>& values) {
  return {values.data(), DType::kFloat32, {static_cast<std::int64_t>(values.size())}};
}

TEST(ZeroPartition, AlignedPartitionOfTheSpecExample) {
  const AlignedPartition p = aligned_partition(1'000'003, 4);
  EXPECT_EQ(p.aligned_numel, 1'000'008);
  EXPECT_EQ(p.partition_numel, 250'002);
  EXPECT_EQ(p.padding, 5);

  // The same group as a layout would record it: the padding is the tail of rank 3.
  ZeroGroup group;
  group.numel = 1'000'003;
  group.aligned_numel = p.aligned_numel;
  group.partition_numel = p.partition_numel;
  group.fragments.resize(4);
  for (std::int64_t rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(group.owned_numel(rank), 250'002);
    EXPECT_EQ(group.group_padding(rank), 0);
  }
  EXPECT_EQ(group.owned_numel(3), 250'002 - 5);
  EXPECT_EQ(group.group_padding(3), 5);

  EXPECT_EQ(aligned_partition(41472, 2).padding, 0);
  EXPECT_EQ(aligned_partition(0, 8).aligned_numel, 0);
  EXPECT_EQ(aligned_partition(7, 1).aligned_numel, 8);  // 2·D = 2 even without data parallelism
  EXPECT_EQ(aligned_partition(1, 8).aligned_numel, 16);
  EXPECT_THROW(aligned_partition(10, 0), base::Error);
}

TEST(ZeroPartition, FlatPartitionExampleOfTheSpec) {
  const GptConfig config = example_config();
  EXPECT_NO_THROW(model::validate(config));
  const ParamTable table = ParamTable::build(config);
  const ZeroLayout layout(table, 2);
  ASSERT_EQ(layout.size(), 3u);
  const std::int64_t numels[] = {41472, 1024, 240};
  for (std::size_t g = 0; g < 3; ++g) {
    EXPECT_EQ(layout[g].decay_group, static_cast<DecayGroup>(g));
    EXPECT_EQ(layout[g].numel, numels[g]);
    EXPECT_EQ(layout[g].aligned_numel, numels[g]);  // divisible by 2D = 4: no padding
    EXPECT_EQ(layout[g].partition_numel, numels[g] / 2);
    EXPECT_EQ(layout[g].group_padding(1), 0);
    EXPECT_EQ(layout.index_of(static_cast<DecayGroup>(g)), g);
  }
  EXPECT_EQ(layout.partition_numel(), 20736 + 512 + 120);

  struct Expected {
    std::string name;
    std::int64_t hp_start;
    std::int64_t numel;
  };
  const std::vector<Expected> expected{
      {"tied_modules.embed.word_embeddings.weight", 0, 20224},
      {"3.self_attention.query_key_value.weight", 20224, 192},
      {"3.self_attention.dense.weight", 20416, 64},
      {"3.mlp.dense_h_to_4h.weight", 20480, 256},
  };
  const std::vector<ZeroFragment>& rank1 = layout[0].fragments[1];
  ASSERT_EQ(rank1.size(), expected.size());
  for (std::size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(table[rank1[k].param].engine_name(), expected[k].name);
    EXPECT_EQ(rank1[k].hp_start, expected[k].hp_start) << expected[k].name;
    EXPECT_EQ(rank1[k].numel, expected[k].numel) << expected[k].name;
    EXPECT_EQ(rank1[k].param_offset, k == 0 ? 20736 : 0) << expected[k].name;
  }
  // Rank 0 holds only the first 20736 rows-elements of the word embeddings.
  ASSERT_EQ(layout[0].fragments[0].size(), 1u);
  EXPECT_EQ(layout[0].fragments[0][0].numel, 20736);
}

TEST(ZeroPartition, EmptyGroupsAreDroppedAndLaterGroupsMoveUp) {
  // A stage holding only the embedding: one decay parameter, so the first half (len//2 = 0) is
  // empty and the file's group 0 is the second half.
  GptConfig config = example_config();
  config.stage_end_spec = 3;
  const ParamTable table = ParamTable::build(config);
  const ZeroLayout layout(table, 2);
  ASSERT_EQ(layout.size(), 2u);
  EXPECT_EQ(layout[0].decay_group, DecayGroup::kDecaySecondHalf);
  EXPECT_EQ(layout[1].decay_group, DecayGroup::kNoDecay);
  EXPECT_EQ(layout.index_of(DecayGroup::kDecayFirstHalf), std::nullopt);
  EXPECT_EQ(layout.index_of(DecayGroup::kDecaySecondHalf), 0u);
  EXPECT_EQ(layout.index_of(DecayGroup::kNoDecay), 1u);
  EXPECT_EQ(layout[0].numel, 5120 * 8);
  EXPECT_EQ(layout[1].numel, 16);
  EXPECT_THROW(layout[2], base::Error);
}

TEST(ZeroPartition, PaddingLongerThanAPartition) {
  GptConfig config = odd_config();
  config.stage_first_spec = config.final_layernorm_spec();
  config.stage_end_spec = config.stage_first_spec + 1;
  const ParamTable table = ParamTable::build(config);
  const ZeroLayout layout(table, 8);
  ASSERT_EQ(layout.size(), 1u);
  const ZeroGroup& group = layout[0];
  EXPECT_EQ(group.decay_group, DecayGroup::kNoDecay);
  EXPECT_EQ(group.numel, 20);
  EXPECT_EQ(group.aligned_numel, 32);
  EXPECT_EQ(group.partition_numel, 4);
  const std::int64_t owned[] = {4, 4, 4, 4, 4, 0, 0, 0};
  for (std::int64_t rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(group.owned_numel(rank), owned[rank]) << rank;
    EXPECT_EQ(group.fragments[static_cast<std::size_t>(rank)].empty(), owned[rank] == 0) << rank;
  }
  // DeepSpeed 0.8.3 still books all of it on the last rank.
  EXPECT_EQ(group.group_padding(7), 12);
  EXPECT_EQ(group.group_padding(5), 0);
  // Rank 2 holds the weight's last 2 elements and the bias's first 2.
  ASSERT_EQ(group.fragments[2].size(), 2u);
  EXPECT_EQ(table[group.fragments[2][0].param].name, "weight");
  EXPECT_EQ(group.fragments[2][0].param_offset, 8);
  EXPECT_EQ(group.fragments[2][1].param_offset, 0);
  EXPECT_EQ(group.fragments[2][1].hp_start, 2);
}

// Invariant 12: the partitions of all ranks, back to back, are the flat group (padding zero);
// the fragments of all ranks cover every parameter element exactly once, at consistent offsets.
TEST(ZeroPartition, PartitionsReproduceTheFlatGroupsAndFragmentsCoverEachParameterOnce) {
  for (const GptConfig& config : invariant_configs()) {
    const ParamTable table = ParamTable::build(config);
    model::ParamBuffer buffer(table, DType::kFloat32);
    fill_numbered(table, buffer.flat());
    for (const std::int64_t dp : {1, 2, 3, 4, 8}) {
      SCOPED_TRACE("dp " + std::to_string(dp) + ", layers from spec " +
                   std::to_string(config.stage_first_spec) + ", h " +
                   std::to_string(config.hidden_size));
      const ZeroLayout layout(table, dp);
      std::vector<std::int64_t> covered_per_param(table.size(), 0);
      for (std::size_t g = 0; g < layout.size(); ++g) {
        const ZeroGroup& group = layout[g];
        EXPECT_EQ(group.aligned_numel % (2 * dp), 0);
        EXPECT_LT(group.padding(), 2 * dp);
        EXPECT_EQ(group.partition_numel * dp, group.aligned_numel);

        const std::vector<float> expected =
            reference_flat_group(layout, group, buffer.flat().data<float>());
        std::vector<float> flat(static_cast<std::size_t>(group.aligned_numel), 1e9f);
        to_flat_group(buffer.flat(), layout, g, vector_tensor(flat));
        EXPECT_EQ(flat, expected);

        std::vector<float> concatenated;
        std::vector<std::int64_t> covered(static_cast<std::size_t>(group.numel), 0);
        for (std::int64_t rank = 0; rank < dp; ++rank) {
          std::vector<float> partition(static_cast<std::size_t>(group.partition_numel), 1e9f);
          gather_partition(buffer.flat(), layout, g, rank, vector_tensor(partition));
          concatenated.insert(concatenated.end(), partition.begin(), partition.end());

          std::int64_t next_hp = 0;  // fragments tile [0, owned) of the partition in order
          for (const ZeroFragment& f : group.fragments[static_cast<std::size_t>(rank)]) {
            EXPECT_EQ(f.hp_start, next_hp);
            next_hp += f.numel;
            ASSERT_GT(f.numel, 0);
            ASSERT_LE(f.param_offset + f.numel, table[f.param].local_numel());
            EXPECT_EQ(table[f.param].group, group.decay_group);
            std::int64_t flat_offset = -1;
            for (std::size_t k = 0; k < group.params.size(); ++k) {
              if (group.params[k] == f.param) flat_offset = group.flat_offsets[k];
            }
            ASSERT_GE(flat_offset, 0);
            EXPECT_EQ(group.partition_begin(rank) + f.hp_start, flat_offset + f.param_offset);
            for (std::int64_t e = 0; e < f.numel; ++e) {
              ++covered[static_cast<std::size_t>(flat_offset + f.param_offset + e)];
            }
            covered_per_param[f.param] += f.numel;
          }
          EXPECT_EQ(next_hp, group.owned_numel(rank));
        }
        EXPECT_EQ(concatenated, expected);
        for (std::size_t e = 0; e < covered.size(); ++e) ASSERT_EQ(covered[e], 1) << e;
      }
      for (std::size_t i = 0; i < table.size(); ++i) {
        EXPECT_EQ(covered_per_param[i], table[i].local_numel()) << table[i].engine_name();
      }
    }
  }
}

TEST(ZeroPartition, ScatterOfAllPartitionsRestoresTheBufferAndLeavesGapsAlone) {
  const ParamTable table = ParamTable::build(odd_config());
  model::ParamBuffer source(table, DType::kFloat32);
  fill_numbered(table, source.flat());
  for (const std::int64_t dp : {1, 3, 8}) {
    const ZeroLayout layout(table, dp);
    model::ParamBuffer restored(table, DType::kFloat32);
    float* out = restored.flat().data<float>();
    for (std::int64_t i = 0; i < table.buffer_numel(); ++i) out[i] = kGapSentinel;
    for (std::size_t g = 0; g < layout.size(); ++g) {
      for (std::int64_t rank = 0; rank < dp; ++rank) {
        std::vector<float> partition(static_cast<std::size_t>(layout[g].partition_numel));
        gather_partition(source.flat(), layout, g, rank, vector_tensor(partition));
        // Garbage in the padding must not reach the buffer.
        const std::int64_t owned = layout[g].owned_numel(rank);
        for (std::size_t e = static_cast<std::size_t>(owned); e < partition.size(); ++e) {
          partition[e] = 1234.0f;
        }
        scatter_partition(vector_tensor(partition), layout, g, rank, restored.flat());
      }
    }
    const float* in = source.flat().data<float>();
    for (std::int64_t i = 0; i < table.buffer_numel(); ++i) ASSERT_EQ(out[i], in[i]) << i;
  }
}

TEST(ZeroPartition, FlatGroupRoundTrip) {
  const ParamTable table = ParamTable::build(odd_config());
  model::ParamBuffer source(table, DType::kFloat32);
  fill_numbered(table, source.flat());
  const ZeroLayout layout(table, 4);
  model::ParamBuffer restored(table, DType::kFloat32);
  float* out = restored.flat().data<float>();
  for (std::int64_t i = 0; i < table.buffer_numel(); ++i) out[i] = kGapSentinel;
  for (std::size_t g = 0; g < layout.size(); ++g) {
    std::vector<float> flat(static_cast<std::size_t>(layout[g].aligned_numel));
    to_flat_group(source.flat(), layout, g, vector_tensor(flat));
    from_flat_group(vector_tensor(flat), layout, g, restored.flat());
  }
  const float* in = source.flat().data<float>();
  for (std::int64_t i = 0; i < table.buffer_numel(); ++i) ASSERT_EQ(out[i], in[i]) << i;
}

TEST(ZeroPartition, CopiesConvertBetweenPrecisions) {
  const ParamTable table = ParamTable::build(example_config());
  const ZeroLayout layout(table, 2);
  model::ParamBuffer master(table, DType::kFloat32);
  float* m = master.flat().data<float>();
  for (std::int64_t i = 0; i < table.buffer_numel(); ++i)
    m[i] = 1.0f + static_cast<float>(i) / 3e4f;

  // An fp32 partition written into a bf16 buffer rounds each element as PyTorch's .to() would.
  model::ParamBuffer params(table, DType::kBFloat16);
  const std::size_t g = 1;
  const std::int64_t ps = layout[g].partition_numel;
  for (std::int64_t rank = 0; rank < 2; ++rank) {
    std::vector<float> partition(static_cast<std::size_t>(ps));
    gather_partition(master.flat(), layout, g, rank, vector_tensor(partition));
    scatter_partition(vector_tensor(partition), layout, g, rank, params.flat());
  }
  // ... and gathering the bf16 buffer into an fp16 partition widens then rounds again.
  std::vector<tensor::Float16> half(static_cast<std::size_t>(ps));
  const Tensor half_partition{half.data(), DType::kFloat16, {ps}};
  gather_partition(params.flat(), layout, g, 1, half_partition);
  for (const std::size_t i : layout[g].params) {
    const model::ParamSpec& param = table[i];
    for (std::int64_t k = 0; k < param.local_numel(); ++k) {
      const float want = tensor::to_float(tensor::to_bfloat16(m[param.offset + k]));
      ASSERT_EQ(tensor::to_float(params.flat().data<tensor::BFloat16>()[param.offset + k]), want);
    }
  }
  for (const ZeroFragment& f : layout[g].fragments[1]) {
    for (std::int64_t e = 0; e < f.numel; ++e) {
      const float bf =
          tensor::to_float(tensor::to_bfloat16(m[table[f.param].offset + f.param_offset + e]));
      ASSERT_EQ(half[static_cast<std::size_t>(f.hp_start + e)].bits, tensor::to_float16(bf).bits);
    }
  }
}

TEST(ZeroPartition, CopiesRejectWrongSizesAndRanks) {
  const ParamTable table = ParamTable::build(example_config());
  const ZeroLayout layout(table, 2);
  model::ParamBuffer buffer(table, DType::kFloat32);
  std::vector<float> partition(static_cast<std::size_t>(layout[2].partition_numel + 1));
  EXPECT_THROW(gather_partition(buffer.flat(), layout, 2, 0, vector_tensor(partition)),
               base::Error);
  partition.pop_back();
  EXPECT_NO_THROW(gather_partition(buffer.flat(), layout, 2, 0, vector_tensor(partition)));
  EXPECT_THROW(gather_partition(buffer.flat(), layout, 2, 2, vector_tensor(partition)),
               base::Error);
  EXPECT_THROW(scatter_partition(vector_tensor(partition), layout, 3, 0, buffer.flat()),
               base::Error);
  EXPECT_THROW(to_flat_group(buffer.flat().narrow(0, 10), layout, 0, vector_tensor(partition)),
               base::Error);
  EXPECT_THROW(ZeroLayout(table, 0), base::Error);
}

// What the chunked collectives rely on: any cut of a flat group into ranges copies out the same
// elements as the whole group, and copying the ranges back restores the buffer, gaps untouched.
TEST(ZeroPartition, RangesOfAFlatGroupCutAnywhere) {
  const ops::DeviceContext host;
  for (const GptConfig& config : invariant_configs()) {
    const ParamTable table = ParamTable::build(config);
    model::ParamBuffer source(table, DType::kFloat32);
    fill_numbered(table, source.flat());
    for (const std::int64_t dp : {1, 3}) {
      const ZeroLayout layout(table, dp);
      for (const std::int64_t chunk : {1, 2, 7, 64, 1000}) {
        SCOPED_TRACE("dp " + std::to_string(dp) + ", chunk " + std::to_string(chunk));
        model::ParamBuffer restored(table, DType::kFloat32);
        float* out = restored.flat().data<float>();
        for (std::int64_t i = 0; i < table.buffer_numel(); ++i) out[i] = kGapSentinel;
        for (std::size_t g = 0; g < layout.size(); ++g) {
          const ZeroGroup& group = layout[g];
          const std::vector<float> expected =
              reference_flat_group(layout, group, source.flat().data<float>());
          for (std::int64_t begin = 0; begin < group.aligned_numel; begin += chunk) {
            const std::int64_t n = std::min(chunk, group.aligned_numel - begin);
            std::vector<float> range(static_cast<std::size_t>(n), 1e9f);
            to_flat_range(host, source.flat(), layout, g, begin, vector_tensor(range));
            ASSERT_EQ(range,
                      std::vector<float>(expected.begin() + begin, expected.begin() + begin + n))
                << "group " << g << " at " << begin;
            for (float& v : range) v = v == 0.0f ? 1234.0f : v;  // padding must not be written
            from_flat_range(host, vector_tensor(range), layout, g, begin, restored.flat());
          }
        }
        const float* in = source.flat().data<float>();
        for (std::int64_t i = 0; i < table.buffer_numel(); ++i) ASSERT_EQ(out[i], in[i]) << i;
      }
    }
  }
  const ParamTable table = ParamTable::build(odd_config());
  const ZeroLayout layout(table, 2);
  model::ParamBuffer buffer(table, DType::kFloat32);
  std::vector<float> range(4);
  EXPECT_THROW(to_flat_range(host, buffer.flat(), layout, 0, layout[0].aligned_numel - 3,
                             vector_tensor(range)),
               base::Error);
  EXPECT_THROW(from_flat_range(host, vector_tensor(range), layout, 0, -1, buffer.flat()),
               base::Error);
}

}  // namespace
}  // namespace mds::train
