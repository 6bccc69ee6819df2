#include "model/pipeline_partition.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "base/error.h"

namespace mds::model {
namespace {

using Parts = std::vector<std::int64_t>;

GptConfig config_with(std::int64_t layers, std::int64_t vocab = 512, std::int64_t max_pos = 64) {
  GptConfig config;
  config.num_layers = layers;
  config.hidden_size = 64;
  config.num_attention_heads = 4;
  config.seq_length = 64;
  config.max_position_embeddings = max_pos;
  config.padded_vocab_size = vocab;
  return config;
}

std::vector<std::int64_t> layers_per_stage(std::int64_t layers, const Parts& parts) {
  std::vector<std::int64_t> counts;
  for (std::size_t k = 0; k + 1 < parts.size(); ++k) {
    std::int64_t count = 0;
    for (std::int64_t l = 0; l < layers; ++l) {
      const std::int64_t spec = GptConfig::layer_spec(l);
      count += spec >= parts[k] && spec < parts[k + 1] ? 1 : 0;
    }
    counts.push_back(count);
  }
  return counts;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const base::Error& error) {
    return error.what();
  }
  return "";
}

TEST(PipelinePartition, UniformVectors) {
  EXPECT_EQ(partition_uniform(10, 4), (Parts{0, 2, 4, 6, 10}));
  EXPECT_EQ(partition_uniform(3, 4), (Parts{0, 1, 2, 3, 3}));
  EXPECT_EQ(partition_uniform(4, 4), (Parts{0, 1, 2, 3, 4}));
  EXPECT_EQ(partition_uniform(0, 2), (Parts{0, 0, 0}));
  EXPECT_EQ(partition_uniform(7, 1), (Parts{0, 7}));
}

TEST(PipelinePartition, BalancedVectors) {
  EXPECT_EQ(partition_balanced(std::vector<double>(7, 1.0), 3), (Parts{0, 3, 6, 7}));
  EXPECT_EQ(partition_balanced({5, 1, 1, 1, 1, 5}, 2), (Parts{0, 3, 6}));
  EXPECT_EQ(partition_balanced({3, 0, 0, 7, 2, 2, 9, 1}, 3), (Parts{0, 4, 6, 8}));
  // Too few items: falls back to uniform.
  EXPECT_EQ(partition_balanced({4, 4}, 3), (Parts{0, 1, 2, 2}));
  // A first weight above the bottleneck makes upstream index weights[-1] (the total); the
  // probe then "succeeds" with an empty first part. Reproduced on purpose.
  EXPECT_EQ(partition_balanced({10, 1, 1, 1}, 2), (Parts{0, 0, 4}));
}

struct TableRow {
  std::int64_t layers;
  std::int64_t stages;
  const char* method;
  Parts parts;
  std::vector<std::int64_t> layers_per_stage;
};

TEST(PipelinePartition, SpecTable) {
  const std::vector<TableRow> rows = {
      {24, 4, "type:transformer", {0, 9, 15, 21, 31}, {6, 6, 6, 6}},
      {24, 4, "type:transformer|embedding", {0, 9, 16, 23, 31}, {6, 7, 7, 4}},
      {24, 4, "uniform", {0, 7, 14, 21, 31}, {4, 7, 7, 6}},
      {40, 4, "type:transformer", {0, 13, 23, 33, 47}, {10, 10, 10, 10}},
      {70,
       12,
       "type:transformer|embedding",
       {0, 8, 14, 20, 26, 32, 38, 44, 50, 56, 62, 68, 77},
       {5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5}},
      {2, 2, "type:transformer", {0, 4, 9}, {1, 1}},
      {6, 4, "type:transformer", {0, 5, 7, 13, 13}, {2, 2, 2, 0}},
  };
  for (const TableRow& row : rows) {
    SCOPED_TRACE(std::to_string(row.layers) + " layers, " + std::to_string(row.stages) +
                 " stages, " + row.method);
    const Parts parts = pipeline_partition(config_with(row.layers), true, row.stages, row.method);
    EXPECT_EQ(parts, row.parts);
    EXPECT_EQ(layers_per_stage(row.layers, parts), row.layers_per_stage);
  }
}

TEST(PipelinePartition, MethodIsCaseInsensitiveAndFp32DropsTheCast) {
  const GptConfig config = config_with(24);
  EXPECT_EQ(pipeline_partition(config, true, 4, "TYPE:Transformer"), (Parts{0, 9, 15, 21, 31}));
  EXPECT_EQ(pipeline_partition(config, true, 4, "Uniform"), (Parts{0, 7, 14, 21, 31}));
  EXPECT_EQ(pipeline_partition(config, false, 4, "type:transformer"), (Parts{0, 9, 15, 21, 30}));
  EXPECT_EQ(pipeline_partition(config, false, 4, "uniform"), (Parts{0, 7, 14, 21, 30}));
  // A regex search, not a full match, over the function names as well.
  EXPECT_EQ(pipeline_partition(config, true, 2, "type:^undo$"), (Parts{0, 27, 31}));
}

TEST(PipelinePartition, SpecListNamesAndCounts) {
  GptConfig config = config_with(2, 5120, 128);
  const std::vector<PipeSpec> half = pipeline_specs(config, true);
  ASSERT_EQ(half.size(), 9u);
  const std::vector<std::string> names = {"_to_float16",
                                          "EmbeddingPipe",
                                          "<lambda>",
                                          "ParallelTransformerLayerPipe",
                                          "ParallelTransformerLayerPipe",
                                          "undo",
                                          "MixedFusedLayerNorm",
                                          "EmbeddingPipe",
                                          "float16_to_fp32"};
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(half[i].name, names[i]) << i;
  EXPECT_EQ(half[1].tied_key, "embed");
  EXPECT_EQ(half[7].tied_key, "embed");
  EXPECT_EQ(half[1].trainable_params, 5120 * 64 + 128 * 64);
  EXPECT_EQ(half[7].trainable_params, half[1].trainable_params);
  EXPECT_EQ(half[3].trainable_params, 12 * 64 * 64 + 13 * 64);
  EXPECT_EQ(half[6].trainable_params, 2 * 64);
  EXPECT_EQ(half[0].trainable_params + half[2].trainable_params + half[5].trainable_params +
                half[8].trainable_params,
            0);
  EXPECT_EQ(pipeline_specs(config, false).size(), 8u);

  // TP-local counts, and the embedding LayerNorm (first-stage view) without positions.
  config.tensor_parallel_size = 2;
  config.embed_layernorm = true;
  config.position_embedding = PositionEmbedding::kAlibi;
  const std::vector<PipeSpec> tp = pipeline_specs(config, true);
  EXPECT_EQ(tp[1].trainable_params, 2560 * 64 + 2 * 64);
  EXPECT_EQ(tp[3].trainable_params, 25184);
}

TEST(PipelinePartition, ParametersMethod) {
  // Golden values from DeepSpeed's partition_balanced over the per-spec counts.
  EXPECT_EQ(pipeline_partition(config_with(4, 5120, 128), true, 2, "parameters"),
            (Parts{0, 5, 11}));
  GptConfig tp2 = config_with(4, 5120, 128);
  tp2.tensor_parallel_size = 2;
  EXPECT_EQ(pipeline_partition(tp2, true, 2, "parameters"), (Parts{0, 5, 11}));
  EXPECT_EQ(pipeline_partition(config_with(8, 5120, 128), true, 4, "parameters"),
            (Parts{0, 3, 9, 13, 15}));
  GptConfig bloom = config_with(8, 512, 128);
  bloom.embed_layernorm = true;
  bloom.position_embedding = PositionEmbedding::kAlibi;
  EXPECT_EQ(pipeline_partition(bloom, false, 3, "parameters"), (Parts{0, 6, 9, 14}));
  EXPECT_EQ(pipeline_partition(config_with(24, 512, 64), true, 4, "parameters"),
            (Parts{0, 9, 15, 21, 31}));
}

TEST(PipelinePartition, StageSpecsFromParts) {
  GptConfig config = config_with(24);
  const Parts parts = pipeline_partition(config, true, 4, "type:transformer");
  set_stage_specs(config, parts, 0);
  EXPECT_EQ(config.stage_first_spec, 0);
  EXPECT_EQ(config.stage_end_spec, 9);
  EXPECT_TRUE(config.stage_owns(GptConfig::kEmbeddingSpec));
  EXPECT_FALSE(config.stage_owns(GptConfig::layer_spec(6)));
  set_stage_specs(config, parts, 3);
  EXPECT_EQ(config.stage_first_spec, 21);
  EXPECT_EQ(config.stage_end_spec, 31);
  EXPECT_TRUE(config.stage_owns(config.head_spec()));
  EXPECT_TRUE(config.stage_owns(GptConfig::layer_spec(18)));
  EXPECT_FALSE(config.stage_owns(GptConfig::layer_spec(17)));
}

TEST(PipelinePartition, EmptyStageIsAnError) {
  GptConfig config = config_with(6);
  const Parts parts = pipeline_partition(config, true, 4, "type:transformer");
  ASSERT_EQ(parts, (Parts{0, 5, 7, 13, 13}));
  set_stage_specs(config, parts, 2);
  EXPECT_EQ(config.stage_first_spec, 7);
  const std::string message = error_of([&] { set_stage_specs(config, parts, 3); });
  EXPECT_NE(message.find("--pp-partition-method"), std::string::npos) << message;
  EXPECT_NE(message.find("stage 3"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { set_stage_specs(config, parts, 4); }), "");
}

TEST(PipelinePartition, BadMethodIsAnError) {
  const GptConfig config = config_with(4);
  std::string message = error_of([&] { pipeline_partition(config, true, 2, "balanced"); });
  EXPECT_NE(message.find("--pp-partition-method"), std::string::npos) << message;
  EXPECT_NE(message.find("balanced"), std::string::npos) << message;
  message = error_of([&] { pipeline_partition(config, true, 2, "profile"); });
  EXPECT_NE(message.find("--pp-partition-method"), std::string::npos) << message;
  message = error_of([&] { pipeline_partition(config, true, 2, "type:attention"); });
  EXPECT_NE(message.find("type:attention"), std::string::npos) << message;
  message = error_of([&] { pipeline_partition(config, true, 2, "type:(transformer"); });
  EXPECT_NE(message.find("--pp-partition-method"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { pipeline_partition(config, true, 0, "uniform"); }), "");
}

}  // namespace
}  // namespace mds::model
