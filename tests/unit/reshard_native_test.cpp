// Names and parameter paths of Megatron-native checkpoints (checkpoints.md §1.1, §1.3, §7.1), as
// merge-mp-partitions reads them.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "ckpt/reshard_native.h"

namespace mds::ckpt {
namespace {

TEST(ReshardNative, TagsFromTheTracker) {
  EXPECT_EQ(megatron_tag("1500", "t"), "iter_0001500");
  EXPECT_EQ(megatron_tag(" 12\n", "t"), "iter_0000012");
  EXPECT_EQ(megatron_tag("release\n", "t"), "release");
  EXPECT_THROW(megatron_tag("", "t"), base::Error);
  EXPECT_THROW(megatron_tag("-3", "t"), base::Error);
  try {
    megatron_tag("global_step3", "ckpt/latest_checkpointed_iteration.txt");
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "ckpt/latest_checkpointed_iteration.txt: 'global_step3' is neither an iteration "
              "number nor 'release'");
  }
}

TEST(ReshardNative, RankFolders) {
  EXPECT_EQ(megatron_rank_folder(0, 0, 1), "mp_rank_00");
  EXPECT_EQ(megatron_rank_folder(1, 3, 4), "mp_rank_01_003");
  EXPECT_EQ(megatron_rank_folder(12, 0, 2), "mp_rank_12_000");
}

TEST(ReshardNative, ParameterPathsMapToSpecsWithGlobalLayerNumbers) {
  using Spec = std::optional<std::pair<std::int64_t, std::string>>;
  // L = 4 in P = 2 stages: stage 1's local layer 1 is global layer 3, spec 6.
  EXPECT_EQ(megatron_param_spec("embedding.word_embeddings.weight", 0, 2, 4),
            (Spec{{1, "word_embeddings.weight"}}));
  EXPECT_EQ(megatron_param_spec("embedding.position_embeddings.weight", 0, 1, 4),
            (Spec{{1, "position_embeddings.weight"}}));
  EXPECT_EQ(megatron_param_spec("encoder.layers.1.mlp.dense_4h_to_h.bias", 1, 2, 4),
            (Spec{{6, "mlp.dense_4h_to_h.bias"}}));
  EXPECT_EQ(megatron_param_spec("encoder.layers.0.self_attention.query_key_value.weight", 0, 2, 4),
            (Spec{{3, "self_attention.query_key_value.weight"}}));
  EXPECT_EQ(megatron_param_spec("transformer.layers.3.input_layernorm.weight", 0, 1, 4),
            (Spec{{6, "input_layernorm.weight"}}));
  EXPECT_EQ(megatron_param_spec("encoder.final_layernorm.bias", 1, 2, 4), (Spec{{8, "bias"}}));
  // Not on this stage, or not a parameter of the model.
  EXPECT_EQ(megatron_param_spec("embedding.word_embeddings.weight", 1, 2, 4), Spec{});
  EXPECT_EQ(megatron_param_spec("encoder.final_layernorm.bias", 0, 2, 4), Spec{});
  EXPECT_EQ(megatron_param_spec("encoder.layers.2.input_layernorm.weight", 0, 2, 4), Spec{});
  EXPECT_EQ(megatron_param_spec("encoder.layers.x.input_layernorm.weight", 0, 1, 4), Spec{});
  EXPECT_EQ(megatron_param_spec("encoder.layers.1", 0, 1, 4), Spec{});
  EXPECT_EQ(megatron_param_spec("pooler.dense.weight", 0, 1, 4), Spec{});
}

}  // namespace
}  // namespace mds::ckpt
