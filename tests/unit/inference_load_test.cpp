// What one rank of a T × P grid loads (tasks::load_inference_model): only its TP rank's layer
// files of its pipeline stage and its mp_rank file, with the tied word embedding of the last stage
// received from the first stage; every weight equals the rank's shard of the whole model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "ckpt/checkpoint_folder.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/deepspeed_layout.h"
#include "model/init.h"
#include "model/pipeline_partition.h"
#include "model/tp_merge.h"
#include "tasks/inference_model.h"
#include "test_support.h"
#include "thread_communicator.h"

namespace mds::tasks {
namespace {

using io::Value;
using tensor::DType;

constexpr std::int64_t kVocab = 70, kPadded = 96;  // padded to a multiple of 16·T at T = 2

config::PretrainArgs model_args() {
  config::PretrainArgs a;
  a.num_layers = 2;
  a.hidden_size = 16;
  a.num_attention_heads = 4;
  a.ffn_hidden_size = 32;
  a.seq_length = 8;
  a.max_position_embeddings = 8;
  a.micro_batch_size = 1;
  return a;
}

model::GptConfig rank_config(std::int64_t tp_rank, std::int64_t stage) {
  model::GptConfig c = inference_model_options(model_args(), kPadded).config;
  c.tensor_parallel_size = 2;
  c.tp_rank = tp_rank;
  model::set_stage_specs(c, model::pipeline_partition(c, false, 2, "type:transformer"), stage);
  return c;
}

Value saved_args() {
  Value fields = Value::dict();
  fields.set("tensor_model_parallel_size", Value::integer(2));
  fields.set("pipeline_model_parallel_size", Value::integer(2));
  return Value::namespace_object(std::move(fields));
}

// The whole model's weights, distinct everywhere.
std::unique_ptr<model::ParamBuffer> whole_weights(const model::ParamTable& table) {
  auto whole = std::make_unique<model::ParamBuffer>(table, DType::kFloat32);
  model::initialize_parameters(*whole, 42);
  float* data = whole->flat().data<float>();
  for (std::int64_t i = 0; i < whole->flat().numel(); ++i) {
    data[i] += 1e-3f * std::sin(static_cast<float>(i));
  }
  return whole;
}

TEST(InferenceLoad, ARankReadsOnlyItsOwnFiles) {
  testing_support::ScratchDir dir;
  const std::string root = dir.path().string();
  const model::ParamTable whole_table =
      model::ParamTable::build(inference_model_options(model_args(), kPadded).config);
  const auto whole = whole_weights(whole_table);
  {
    // pretrain's weights-only files of a T2 × P2 run.
    ckpt::StagedFolder folder(root + "/global_step5");
    for (std::int64_t pp = 0; pp < 2; ++pp) {
      for (std::int64_t tp = 0; tp < 2; ++tp) {
        const model::ParamTable table = model::ParamTable::build(rank_config(tp, pp));
        const model::ParamBuffer params(table, DType::kFloat32);
        model::split_tp_shard(*whole, 2, params);
        ckpt::TrainingState state;
        state.table = &table;
        state.params = params.flat();
        state.ranks = ckpt::CheckpointRanks{tp, pp, 0, 2, 2, 1};
        state.iteration = state.global_steps = 5;
        state.padded_vocab_size = kPadded;
        state.original_vocab_size = kVocab;
        state.args = saved_args();
        ckpt::SaveOptions options;
        options.save_optimizer = false;
        ckpt::write_deepspeed_rank_files(folder, state, options);
      }
    }
    folder.commit();
    ckpt::write_text_file_atomically(root + "/latest", "global_step5");
  }
  // Keep only TP rank 1 of the last stage: its layer files and mp_rank_03.
  const model::ParamTable own_table = model::ParamTable::build(rank_config(1, 1));
  std::set<std::string> own{ckpt::model_states_file_name(3)};
  for (const std::int64_t layer : own_table.saved_layers()) {
    own.insert(model::layer_file_name(layer, 1));
  }
  std::size_t removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root + "/global_step5")) {
    if (own.count(entry.path().filename().string()) == 0) {
      std::filesystem::remove(entry.path());
      ++removed;
    }
  }
  EXPECT_GT(removed, 0u);

  CheckpointInfo checkpoint;
  checkpoint.dir = root;
  checkpoint.tag = "global_step5";
  checkpoint.folder = root + "/global_step5";
  checkpoint.grid = {2, 2};
  checkpoint.padded_vocab = kPadded;
  // The first stage's TP rank 1 sends its word embedding shard over the embedding group.
  const model::ParamTable first_table = model::ParamTable::build(rank_config(1, 0));
  const model::ParamBuffer first(first_table, DType::kFloat32);
  model::split_tp_shard(*whole, 2, first);
  auto mail = std::make_shared<test::Mailboxes>();
  std::thread first_stage([&] {
    test::ThreadCommunicator embedding("embedding", mail, 0, 2);
    embedding.broadcast(first.view(first_table.index_of(model::GptConfig::kEmbeddingSpec,
                                                        "word_embeddings.weight")),
                        0);
  });
  test::ThreadCommunicator embedding("embedding", mail, 1, 2);
  InferenceComms comms;
  comms.embedding = &embedding;
  comms.tp_size = 2;
  comms.tp_rank = 1;
  comms.pp_size = 2;
  comms.pp_rank = 1;
  std::FILE* quiet = std::fopen("/dev/null", "w");
  const base::Log log("test", quiet, quiet);
  InferenceModel m;
  std::string error;
  try {
    m = load_inference_model(model_args(), kVocab, checkpoint, comms, log);
  } catch (const std::exception& e) {
    error = e.what();  // the sending thread ends anyway: its sends are buffered
  }
  first_stage.join();
  std::fclose(quiet);
  ASSERT_EQ(error, "");

  const model::ParamBuffer expected(own_table, DType::kFloat32);
  model::split_tp_shard(*whole, 2, expected);
  ASSERT_EQ(m.table->size(), own_table.size());
  for (std::size_t i = 0; i < own_table.size(); ++i) {
    // The last stage's copy of the position embeddings is in no file and unused (as in pretrain).
    if (own_table[i].tied_replica && own_table[i].name == "position_embeddings.weight") continue;
    const auto got = m.params->view(i).host_span<float>();
    const auto want = expected.view(i).host_span<float>();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()))
        << own_table[i].engine_name();
  }
  EXPECT_EQ(m.options.config.tp_rank, 1);
  EXPECT_TRUE(m.options.config.stage_owns(m.options.config.head_spec()));
  EXPECT_FALSE(m.options.config.stage_owns(model::GptConfig::kEmbeddingSpec));
}

}  // namespace
}  // namespace mds::tasks
