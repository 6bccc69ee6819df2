// merge-mp-partitions in process: checkpoints of initial weights (which do not depend on the grid,
// model/init.h) written at one TP × PP grid and re-partitioned for another must load at that grid
// as its own initial weights, with the vocabulary cut or zero-padded; bad inputs fail with one line
// and write nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "ckpt/checkpoint_folder.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/deepspeed_layout.h"
#include "ckpt/pt_builder.h"
#include "ckpt/reshard.h"
#include "ckpt/reshard_native.h"
#include "io/torch_file.h"
#include "model/init.h"
#include "model/param_buffer.h"
#include "model/pipeline_partition.h"
#include "test_support.h"

namespace mds::ckpt {
namespace {

using io::Value;
using model::GptConfig;
using testing_support::Argv;
using testing_support::read_file;
using testing_support::ScratchDir;

constexpr std::int64_t kVocab = 70;  // padded with 16·T: 80 at T = 1, 96 at T = 2, 128 at T = 4
constexpr std::uint64_t kSeed = 42;

std::int64_t padded(std::int64_t tp) {
  const std::int64_t multiple = 16 * tp;
  return (kVocab + multiple - 1) / multiple * multiple;
}

GptConfig shape(std::int64_t tp, std::int64_t tp_rank) {
  GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 4;
  c.ffn_hidden_size = 32;
  c.seq_length = 8;
  c.max_position_embeddings = 8;
  c.padded_vocab_size = padded(tp);
  c.tensor_parallel_size = tp;
  c.tp_rank = tp_rank;
  return c;
}

GptConfig rank_config(std::int64_t tp, std::int64_t pp, std::int64_t tp_rank, std::int64_t stage,
                      bool half) {
  GptConfig c = shape(tp, tp_rank);
  model::set_stage_specs(c, model::pipeline_partition(c, half, pp, "type:transformer"), stage);
  return c;
}

Value saved_args(std::int64_t tp, std::int64_t pp) {
  Value fields = Value::dict();
  fields.set("num_layers", Value::integer(2));
  fields.set("hidden_size", Value::integer(16));
  fields.set("num_attention_heads", Value::integer(4));
  fields.set("max_position_embeddings", Value::integer(8));
  fields.set("position_embedding_type",
             Value::object("megatron.enums", "PositionEmbeddingType", {Value::integer(2)}, false));
  fields.set("tensor_model_parallel_size", Value::integer(tp));
  fields.set("pipeline_model_parallel_size", Value::integer(pp));
  fields.set("seed", Value::integer(1234));
  fields.set("padded_vocab_size", Value::integer(padded(tp)));
  return Value::namespace_object(std::move(fields));
}

OptimizerLayout layout_of(tensor::DType dtype) {
  return dtype == tensor::DType::kBFloat16 ? OptimizerLayout::kBf16 : OptimizerLayout::kFp32;
}

// pretrain's files for the initial weights at T × P (one DP rank), iteration 7. `tweak` may change
// a rank's weights before they are written.
template <typename Tweak>
void write_source(const std::string& dir, std::int64_t tp_size, std::int64_t pp_size,
                  tensor::DType dtype, Tweak tweak) {
  StagedFolder folder(dir + "/global_step7");
  for (std::int64_t pp = 0; pp < pp_size; ++pp) {
    for (std::int64_t tp = 0; tp < tp_size; ++tp) {
      const model::ParamTable table = model::ParamTable::build(
          rank_config(tp_size, pp_size, tp, pp, dtype != tensor::DType::kFloat32));
      const model::ParamBuffer params(table, dtype);
      model::initialize_parameters(params, kSeed);
      tweak(params, tp);
      TrainingState state;
      state.table = &table;
      state.params = params.flat();
      state.layout = layout_of(dtype);
      state.ranks = CheckpointRanks{tp, pp, 0, tp_size, pp_size, 1};
      state.iteration = state.global_steps = 7;
      state.global_samples = state.consumed_train_samples = 56;
      state.consumed_train_tokens = 448;
      state.padded_vocab_size = padded(tp_size);
      state.original_vocab_size = kVocab;
      state.args = saved_args(tp_size, pp_size);
      SaveOptions options;
      options.save_optimizer = false;
      write_deepspeed_rank_files(folder, state, options);
    }
  }
  folder.commit();
  write_text_file_atomically(dir + "/latest", "global_step7");
}

void write_source(const std::string& dir, std::int64_t tp, std::int64_t pp, tensor::DType dtype) {
  write_source(dir, tp, pp, dtype, [](const model::ParamBuffer&, std::int64_t) {});
}

// The same initial weights as Megatron-native files (checkpoints.md §1): iter_0000007 with one
// model_optim_rng.pt per (tp, pp), stage-local layer numbers, L / P layers a stage.
void write_megatron_source(const std::string& dir, std::int64_t tp_size, std::int64_t pp_size) {
  const std::string folder = dir + "/iter_0000007";
  const std::int64_t per_stage = 2 / pp_size;
  for (std::int64_t pp = 0; pp < pp_size; ++pp) {
    for (std::int64_t tp = 0; tp < tp_size; ++tp) {
      const model::ParamTable table = model::ParamTable::build(shape(tp_size, tp));
      const model::ParamBuffer params(table, tensor::DType::kFloat32);
      model::initialize_parameters(params, kSeed);
      PtBuilder builder("cpu");
      const auto tensor = [&](std::int64_t layer, const std::string& name) {
        const std::size_t i = table.index_of(layer, name);
        const tensor::Tensor view = params.view(i);
        return builder.view({static_cast<const char*>(view.raw()), view.bytes()},
                            tensor::DType::kFloat32,
                            {table[i].local_shape.begin(), table[i].local_shape.end()});
      };
      const auto leaf = [](Value value) {
        Value dict = Value::ordered_dict();
        dict.set("weight", std::move(value));
        return dict;
      };
      Value language_model = Value::ordered_dict();
      if (pp == 0) {
        Value embedding = Value::ordered_dict();
        embedding.set("word_embeddings", leaf(tensor(1, "word_embeddings.weight")));
        embedding.set("position_embeddings", leaf(tensor(1, "position_embeddings.weight")));
        language_model.set("embedding", std::move(embedding));
      }
      Value encoder = Value::ordered_dict();
      for (std::int64_t local = 0; local < per_stage; ++local) {
        const std::int64_t spec = GptConfig::layer_spec(pp * per_stage + local);
        for (const model::ParamSpec& param : table.params()) {
          if (param.layer != spec) continue;
          encoder.set("layers." + std::to_string(local) + "." + param.name,
                      tensor(spec, param.name));
        }
      }
      if (pp == pp_size - 1) {
        encoder.set("final_layernorm.weight", tensor(6, "weight"));
        encoder.set("final_layernorm.bias", tensor(6, "bias"));
      }
      language_model.set("encoder", std::move(encoder));
      Value model_tree = Value::dict();
      model_tree.set("language_model", std::move(language_model));
      if (pp == pp_size - 1 && pp_size > 1) {
        model_tree.set("word_embeddings_for_head", leaf(tensor(1, "word_embeddings.weight")));
      }
      Value info = Value::dict();
      info.set("padded_vocab_size", Value::integer(padded(tp_size)));
      info.set("original_vocab_size", Value::integer(kVocab));
      Value root = Value::dict();
      root.set("args", saved_args(tp_size, pp_size));
      root.set("checkpoint_version", Value::real(3.0));
      root.set("iteration", Value::integer(7));
      root.set("tokens", Value::integer(448));
      root.set("checkpoint_info", std::move(info));
      root.set("model", std::move(model_tree));
      const std::string rank = folder + "/" + megatron_rank_folder(tp, pp, pp_size);
      std::filesystem::create_directories(rank);
      builder.write(rank + "/model_optim_rng.pt", root);
    }
  }
  write_text_file_atomically(dir + "/latest_checkpointed_iteration.txt", "7");
}

void run_merge(const std::string& load, const std::string& save, std::int64_t tp, std::int64_t pp,
               std::vector<std::string> extra = {}) {
  std::vector<std::string> words = {"merge-mp-partitions",
                                    "--num-layers",
                                    "2",
                                    "--hidden-size",
                                    "16",
                                    "--num-attention-heads",
                                    "4",
                                    "--ffn-hidden-size",
                                    "32",
                                    "--seq-length",
                                    "8",
                                    "--max-position-embeddings",
                                    "8",
                                    "--make-vocab-size-divisible-by",
                                    "16",
                                    "--load",
                                    load,
                                    "--save",
                                    save,
                                    "--target-tensor-model-parallel-size",
                                    std::to_string(tp),
                                    "--target-pipeline-model-parallel-size",
                                    std::to_string(pp)};
  words.insert(words.end(), extra.begin(), extra.end());
  Argv argv(words);
  MergeMpArgs args = parse_merge_mp_args(argv.argc(), argv.argv());
  std::FILE* quiet = std::fopen("/dev/null", "w");
  const base::Log log("merge-mp-partitions", quiet, quiet);
  try {
    merge_mp_partitions(args, log);
  } catch (...) {
    std::fclose(quiet);
    throw;
  }
  std::fclose(quiet);
}

// Loads every rank of the T × P checkpoint in `dir` and compares it with the initial weights at
// that grid, whose word-embedding rows from `zero_from` on must be zero instead.
void expect_initial_weights(const std::string& dir, std::int64_t tp_size, std::int64_t pp_size,
                            tensor::DType dtype, std::int64_t zero_from) {
  for (std::int64_t pp = 0; pp < pp_size; ++pp) {
    for (std::int64_t tp = 0; tp < tp_size; ++tp) {
      const GptConfig config =
          rank_config(tp_size, pp_size, tp, pp, dtype != tensor::DType::kFloat32);
      const model::ParamTable table = model::ParamTable::build(config);
      const model::ParamBuffer loaded(table, dtype), expected(table, dtype);
      model::initialize_parameters(expected, kSeed);
      TrainingState state;
      state.table = &table;
      state.params = loaded.flat();
      state.layout = layout_of(dtype);
      state.ranks = CheckpointRanks{tp, pp, 0, tp_size, pp_size, 1};
      LoadOptions options;
      options.load_optimizer = false;
      options.weights_only = true;
      load_deepspeed_checkpoint(dir, "global_step7", state, options);  // RNG states checked too
      EXPECT_EQ(state.iteration, 7);
      EXPECT_EQ(state.consumed_train_tokens, 448);
      for (std::size_t p = 0; p < table.size(); ++p) {
        const model::ParamSpec& spec = table[p];
        if (spec.tied_replica) continue;
        const tensor::Tensor want = expected.view(p);
        if (spec.split == model::TpSplit::kVocab) {
          const std::int64_t row_bytes = spec.local_shape[1] * tensor::dtype_size(dtype);
          const std::int64_t first = tp * spec.local_shape[0];
          for (std::int64_t r = std::max<std::int64_t>(zero_from - first, 0);
               r < spec.local_shape[0]; ++r) {
            std::memset(static_cast<char*>(want.raw()) + r * row_bytes, 0,
                        static_cast<std::size_t>(row_bytes));
          }
        }
        EXPECT_EQ(std::memcmp(loaded.view(p).raw(), want.raw(), want.bytes()), 0)
            << dir << " T=" << tp_size << " P=" << pp_size << " rank (" << pp << ", " << tp << ") "
            << spec.engine_name();
      }
    }
  }
}

std::vector<std::string> checkpoint_files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/global_step7")) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class Reshard : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return scratch_.file(name); }
  ScratchDir scratch_;
};

TEST_F(Reshard, MergesTwoByTwoIntoOneProcessCuttingThePaddedRows) {
  write_source(path("src"), 2, 2, tensor::DType::kFloat32);
  run_merge(path("src"), path("out"), 1, 1);
  expect_initial_weights(path("out"), 1, 1, tensor::DType::kFloat32, padded(1));
  EXPECT_EQ(checkpoint_files(path("out")),
            (std::vector<std::string>{
                "layer_01-model_00-model_states.pt", "layer_03-model_00-model_states.pt",
                "layer_04-model_00-model_states.pt", "layer_06-model_00-model_states.pt",
                "mp_rank_00_model_states.pt"}));
  EXPECT_EQ(read_file(path("out/latest")), "global_step7");

  const io::TorchFile states =
      io::TorchFile::open(path("out/global_step7/mp_rank_00_model_states.pt"));
  const io::ValueRef root = states.root_ref();
  EXPECT_EQ(root["mp_world_size"].as_int(), 1);
  EXPECT_EQ(root["dp_world_size"].as_int(), 1);
  EXPECT_TRUE(root["optimizer"].is_none());
  EXPECT_TRUE(root["param_shapes"].is_none());
  EXPECT_EQ(root["global_steps"].as_int(), 7);
  EXPECT_EQ(root["checkpoint_info"]["padded_vocab_size"].as_int(), 80);
  EXPECT_EQ(root["checkpoint_info"]["original_vocab_size"].as_int(), kVocab);
  const io::ValueRef args = root["args"].object_state();
  EXPECT_EQ(args["tensor_model_parallel_size"].as_int(), 1);
  EXPECT_EQ(args["pipeline_model_parallel_size"].as_int(), 1);
  EXPECT_EQ(args["padded_vocab_size"].as_int(), 80);
  EXPECT_EQ(args["data_parallel_size"].as_int(), 1);
  EXPECT_EQ(args["iteration"].as_int(), 7);
}

TEST_F(Reshard, SplitsOneProcessOverTensorAndPipelineRanksInBf16) {
  write_source(path("src"), 1, 1, tensor::DType::kBFloat16);
  for (const auto& [tp, pp] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{4, 2}}) {
    const std::string out = path("out-" + std::to_string(tp) + "x" + std::to_string(pp));
    run_merge(path("src"), out, tp, pp);
    // The rows past T = 1's padding are new: zero.
    expect_initial_weights(out, tp, pp, tensor::DType::kBFloat16, padded(1));
    const io::TorchFile last =
        io::TorchFile::open(out + "/global_step7/" + model_states_file_name(pp * tp - 1));
    EXPECT_EQ(last.root_ref()["mp_world_size"].as_int(), tp * pp);
    EXPECT_EQ(last.root_ref()["args"].object_state()["rank"].as_int(), tp * pp - 1);
    EXPECT_FALSE(last.root_ref()["param_shapes"].is_none()) << "bf16 files list param_shapes";
  }
}

TEST_F(Reshard, TensorParallelRoundTripGivesBackTheSameLayerFiles) {
  write_source(path("src"), 1, 1, tensor::DType::kBFloat16);
  run_merge(path("src"), path("two"), 2, 1);
  run_merge(path("two"), path("back"), 1, 1);
  const std::vector<std::string> names = checkpoint_files(path("src"));
  ASSERT_EQ(names, checkpoint_files(path("back")));
  for (const std::string& name : names) {
    if (name.rfind("layer_", 0) != 0) continue;
    EXPECT_EQ(read_file(path("src/global_step7/" + name)),
              read_file(path("back/global_step7/" + name)))
        << name;
  }
}

TEST_F(Reshard, ReadsMegatronNativeCheckpoints) {
  write_megatron_source(path("native"), 2, 2);
  run_merge(path("native"), path("out"), 1, 1);
  expect_initial_weights(path("out"), 1, 1, tensor::DType::kFloat32, padded(1));
  run_merge(path("native"), path("out22"), 2, 2);
  expect_initial_weights(path("out22"), 2, 2, tensor::DType::kFloat32, padded(2));
  std::filesystem::remove(path("native/iter_0000007/mp_rank_01_001/model_optim_rng.pt"));
  std::string message;
  try {
    run_merge(path("native"), path("out-missing"), 1, 1);
  } catch (const base::Error& e) {
    message = e.what();
  }
  EXPECT_EQ(message.rfind(path("native/iter_0000007/mp_rank_01_001/model_optim_rng.pt") +
                              ": missing from the checkpoint",
                          0),
            0u)
      << message;
}

// The error of a merge that must fail; it is one line and nothing is written.
std::string merge_error(const std::string& load, const std::string& save, std::int64_t tp,
                        std::int64_t pp, std::vector<std::string> extra = {}) {
  std::string message;
  try {
    run_merge(load, save, tp, pp, std::move(extra));
  } catch (const base::Error& e) {
    message = e.what();
  }
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(save + "/latest")) << message;
  EXPECT_FALSE(std::filesystem::exists(save + "/global_step7")) << message;
  return message;
}

TEST_F(Reshard, DifferingReplicasAreNamed) {
  write_source(path("src"), 2, 1, tensor::DType::kFloat32,
               [](const model::ParamBuffer& params, std::int64_t tp) {
                 if (tp != 1) return;
                 const tensor::Tensor ln =
                     params.view(params.table().index_of(4, "input_layernorm.weight"));
                 ln.host_span<float>()[3] = 1.5f;
               });
  const std::string message = merge_error(path("src"), path("out"), 1, 1);
  EXPECT_NE(message.find("/layer_04-model_01-model_states.pt: input_layernorm.weight differs from "
                         "TP rank 0's copy in 1 of 16 elements"),
            std::string::npos)
      << message;
}

TEST_F(Reshard, BadInputsFailWithOneLine) {
  write_source(path("src"), 2, 2, tensor::DType::kFloat32);
  EXPECT_NE(
      merge_error(path("src"), path("out"), 3, 1)
          .find("--target-tensor-model-parallel-size 3 does not divide the 4 attention heads"),
      std::string::npos);
  EXPECT_NE(merge_error(path("src"), path("out"), 1, 4).find("gets no layer"), std::string::npos);
  EXPECT_NE(merge_error(path("src"), path("out"), 1, 1, {"--tensor-model-parallel-size", "4"})
                .find("--tensor-model-parallel-size 4 contradicts the checkpoint"),
            std::string::npos);
  EXPECT_NE(merge_error(path("src"), path("out"), 1, 1, {"--bf16"}).find("whose weights are"),
            std::string::npos);
  EXPECT_NE(merge_error(path("src"), path("out"), 1, 1, {"--model-type", "BERT"})
                .find("--model-type BERT: only GPT checkpoints are supported"),
            std::string::npos);
  EXPECT_NE(merge_error(path("src"), path("out"), 1, 1, {"--make-vocab-size-divisible-by", "8"})
                .find("give the flags it was trained with"),
            std::string::npos);
  EXPECT_NE(merge_error(path("src"), path("out"), 1, 1, {"--num-layers", "3"})
                .find("num_layers is 2 in the checkpoint but 3 on the command line"),
            std::string::npos);
  std::filesystem::remove(path("src/global_step7/layer_04-model_01-model_states.pt"));
  EXPECT_EQ(merge_error(path("src"), path("out"), 1, 1)
                .rfind(path("src/global_step7/layer_04-model_01-model_states.pt") +
                           ": missing from the checkpoint",
                       0),
            0u);
  EXPECT_NE(merge_error(path("nowhere"), path("out"), 1, 1).find("no such checkpoint folder"),
            std::string::npos);
}

}  // namespace
}  // namespace mds::ckpt
