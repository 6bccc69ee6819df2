// The grid evaluate and generate run on (tasks/inference_grid.h): sizes from the flags or the
// checkpoint, the world size they need, and the sizes the model cannot be cut into.
#include "tasks/inference_grid.h"

#include <gtest/gtest.h>

namespace mds::tasks {
namespace {

config::PretrainArgs model_args() {
  config::PretrainArgs a;
  a.num_layers = 2;
  a.hidden_size = 32;
  a.num_attention_heads = 4;
  a.ffn_hidden_size = 128;
  return a;
}

GridChoice choose(int world, RequestedGrid requested, GridSizes saved,
                  std::int64_t padded_vocab = 50304) {
  return choose_inference_grid(world, requested, saved, model_args(), padded_vocab);
}

void expect_error(const GridChoice& choice, const std::string& text) {
  EXPECT_NE(choice.error.find(text), std::string::npos) << choice.error;
}

TEST(InferenceGrid, OneProcessMergesAnyCheckpoint) {
  for (const GridSizes saved : {GridSizes{1, 1}, GridSizes{2, 1}, GridSizes{2, 2}}) {
    const GridChoice choice = choose(1, {}, saved);
    EXPECT_EQ(choice.error, "");
    EXPECT_EQ(choice.sizes, (GridSizes{1, 1}));
  }
  EXPECT_EQ(choose(1, {1, 1}, {2, 2}).error, "");  // 1 × 1 given explicitly
}

TEST(InferenceGrid, OneProcessRefusesSizesThatNeedMoreRanks) {
  const GridChoice choice = choose(1, {2, std::nullopt}, {2, 1});
  expect_error(choice,
               "--tensor-model-parallel-size 2 × --pipeline-model-parallel-size 1 = 2 ranks, but "
               "this is one process: launch 2 ranks (mpirun -np 2");
}

TEST(InferenceGrid, RanksDefaultToTheCheckpointsSizes) {
  GridChoice choice = choose(4, {}, {2, 2});
  EXPECT_EQ(choice.error, "");
  EXPECT_EQ(choice.sizes, (GridSizes{2, 2}));
  choice = choose(2, {}, {1, 2});
  EXPECT_EQ(choice.sizes, (GridSizes{1, 2}));
  // Given sizes win; one not given is the checkpoint's.
  choice = choose(2, {1, 2}, {2, 1});
  EXPECT_EQ(choice.error, "");
  EXPECT_EQ(choice.sizes, (GridSizes{1, 2}));
  choice = choose(4, {std::nullopt, 2}, {2, 1});
  EXPECT_EQ(choice.error, "");
  EXPECT_EQ(choice.sizes, (GridSizes{2, 2}));
}

TEST(InferenceGrid, WorldSizeMustBeTheProductOfTheSizes) {
  expect_error(choose(3, {}, {2, 1}),
               "world size 3 does not equal --tensor-model-parallel-size 2 × "
               "--pipeline-model-parallel-size 1 = 2");
  expect_error(choose(4, {}, {2, 1}), "sizes not given are the checkpoint's, 2 × 1");
  expect_error(choose(2, {2, std::nullopt}, {2, 2}), "world size 2 does not equal");
}

TEST(InferenceGrid, EvaluationRunsAReplicaOnEveryTPTimesPRanks) {
  const auto evaluation = [](int world, RequestedGrid requested, GridSizes saved) {
    return choose_inference_grid(world, requested, saved, model_args(), 50304, true);
  };
  GridChoice choice = evaluation(8, {}, {2, 2});
  EXPECT_EQ(choice.error, "");
  EXPECT_EQ(choice.sizes, (GridSizes{2, 2, 2}));
  choice = evaluation(3, {}, {1, 1});
  EXPECT_EQ(choice.sizes, (GridSizes{1, 1, 3}));
  choice = evaluation(4, {std::nullopt, 2}, {2, 1});
  EXPECT_EQ(choice.sizes, (GridSizes{2, 2, 1}));
  expect_error(evaluation(6, {}, {2, 2}),
               "world size 6 is not a multiple of --tensor-model-parallel-size 2 × "
               "--pipeline-model-parallel-size 2 = 4");
  EXPECT_EQ(evaluation(1, {}, {2, 2}).sizes, (GridSizes{1, 1, 1}));
  // Generation keeps one replica.
  expect_error(choose(8, {}, {2, 2}), "world size 8 does not equal");
}

TEST(InferenceGrid, SizesMustFitTheModel) {
  expect_error(choose(3, {3, 1}, {1, 1}),
               "--tensor-model-parallel-size 3: --num-attention-heads 4 is not divisible by it");
  expect_error(choose(2, {2, 1}, {1, 1}, 50257),
               "--tensor-model-parallel-size 2: the checkpoint's padded vocabulary of 50257 rows "
               "is not divisible by it");
  expect_error(choose(3, {1, 3}, {1, 1}),
               "--pipeline-model-parallel-size 3 exceeds --num-layers 2");
  expect_error(choose(2, {0, 2}, {1, 1}), "--tensor-model-parallel-size must be >= 1, got 0");
  config::PretrainArgs odd_ffn = model_args();
  odd_ffn.num_attention_heads = 2;
  odd_ffn.ffn_hidden_size = 33;
  EXPECT_NE(choose_inference_grid(2, {2, 1}, {1, 1}, odd_ffn, 64).error.find("FFN width 33"),
            std::string::npos);
}

TEST(InferenceGrid, RequestedSizesAreTheGivenFlags) {
  config::PretrainArgs a = model_args();
  a.tensor_model_parallel_size = 2;  // a default-looking value that was not given
  RequestedGrid requested = requested_grid(a);
  EXPECT_FALSE(requested.tp);
  EXPECT_FALSE(requested.pp);
  a.given_flags = {"--pipeline-model-parallel-size", "--tensor-model-parallel-size"};
  a.pipeline_model_parallel_size = 1;
  requested = requested_grid(a);
  EXPECT_EQ(requested.tp, 2);
  EXPECT_EQ(requested.pp, 1);
}

}  // namespace
}  // namespace mds::tasks
