// ckpt/universal_convert.h on one-rank checkpoints of every optimizer layout: every parameter's
// fp32 master and Adam moments come out whole with v0.1's keys, Adam's step in
// zero/optimizer_state.pt, the mp_rank file verbatim, latest_universal beside the output; bad
// input fails with one line and leaves nothing behind. (Multi-rank grids: e2e
// convert_universal_test.sh.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/universal_convert.h"
#include "ckpt/universal_source.h"
#include "ckpt_test_state.h"
#include "io/torch_file.h"
#include "test_support.h"

namespace mds::ckpt {
namespace {

using io::Value;
using testing::fill;
using testing::OwnedState;
using testing::sample;
using testing::tiny_config;
using testing_support::ScratchDir;

// The Megatron args the converter reads the model's shape from (tiny_config's model).
Value tiny_args() {
  Value fields = Value::dict();
  fields.set("num_layers", Value::integer(2));
  fields.set("hidden_size", Value::integer(16));
  fields.set("ffn_hidden_size", Value::integer(64));
  fields.set("num_attention_heads", Value::integer(2));
  fields.set("kv_channels", Value::none());
  fields.set("max_position_embeddings", Value::integer(8));
  fields.set("position_embedding_type",
             Value::object("megatron.enums", "PositionEmbeddingType", {Value::integer(2)}, false));
  fields.set("glu_activation", Value::none());
  fields.set("seq_length", Value::integer(8));
  fields.set("tensor_model_parallel_size", Value::integer(1));
  fields.set("pipeline_model_parallel_size", Value::integer(1));
  fields.set("padded_vocab_size", Value::integer(64));
  return Value::namespace_object(std::move(fields));
}

// A saved one-rank checkpoint in <dir>/ckpt/global_step12 and what it holds.
struct Saved {
  explicit Saved(OptimizerLayout layout) : state(tiny_config(), layout) {
    fill(state);
    state.state.args = tiny_args();
    save_deepspeed_checkpoint(dir.file("ckpt"), state.state);
  }
  std::string folder() const { return dir.file("ckpt/global_step12"); }
  std::string output() const { return dir.file("universal/global_step12_universal"); }

  // The value the converter must write for element j of the table layout.
  float expected(std::string_view state_name, std::int64_t j) const {
    if (state_name == "exp_avg") return sample(3, j);
    if (state_name == "exp_avg_sq") return std::abs(sample(4, j));
    if (state.state.layout == OptimizerLayout::kFp32) return sample(1, j);  // weights = masters
    return sample(2, j);
  }

  ScratchDir dir;
  OwnedState state;
};

void convert(const std::string& input, const std::string& output, std::int64_t workers = 2) {
  UniversalArgs args;
  args.input_folder = input;
  args.output_folder = output;
  args.num_extract_workers = workers;
  args.num_merge_workers = workers;
  std::FILE* quiet = std::fopen("/dev/null", "w");
  const base::Log log("convert-to-universal-checkpoint", quiet, quiet);
  try {
    convert_to_universal_checkpoint(args, log);
  } catch (...) {
    std::fclose(quiet);
    throw;
  }
  std::fclose(quiet);
}

std::string convert_error(const std::string& input, const std::string& output) {
  try {
    convert(input, output);
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

std::vector<float> floats(const io::TorchFile& file, const io::TensorRef& tensor) {
  const std::string bytes = file.tensor_bytes(tensor);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

class UniversalConvert : public ::testing::TestWithParam<OptimizerLayout> {};

TEST_P(UniversalConvert, EveryParameterWholeWithV01Keys) {
  const Saved saved(GetParam());
  convert(saved.folder(), saved.output());
  const model::ParamTable& table = saved.state.table;
  std::size_t checked = 0;
  for (const model::ParamSpec& param : table.params()) {
    for (const std::string_view state : {"fp32", "exp_avg", "exp_avg_sq"}) {
      const std::string path =
          saved.output() + "/zero/" + param.engine_name() + "/" + std::string(state) + ".pt";
      const io::TorchFile file = io::TorchFile::open(path);
      const Value& root = file.root();
      const io::TensorRef& tensor = root.find("param")->as_tensor();
      EXPECT_EQ(tensor.shape,
                std::vector<std::int64_t>(param.full_shape.begin(), param.full_shape.end()))
          << path;
      const std::vector<float> values = floats(file, tensor);
      bool equal = values.size() == static_cast<std::size_t>(param.full_numel());
      for (std::int64_t k = 0; equal && k < param.full_numel(); ++k) {
        equal = values[static_cast<std::size_t>(k)] == saved.expected(state, param.offset + k);
      }
      EXPECT_TRUE(equal) << path;
      const Value* cat_dim = root.find("cat_dim");
      if (param.split == model::TpSplit::kReplicated) {
        EXPECT_EQ(cat_dim, nullptr) << path;
      } else {
        ASSERT_NE(cat_dim, nullptr) << path;
        EXPECT_EQ(cat_dim->as_int(), param.split == model::TpSplit::kRow ? 1 : 0) << path;
      }
      const Value* padding = root.find("vocab_divisibility_padding_tensor");
      EXPECT_EQ(padding != nullptr, param.split == model::TpSplit::kVocab) << path;
      if (padding) {  // 50 tokens padded to 64: v0.1 stores the last row
        const std::vector<float> row = floats(file, padding->as_tensor());
        EXPECT_EQ(row, std::vector<float>(values.end() - 16, values.end()));
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * table.size());
  EXPECT_EQ(table.size(), 28u);

  const io::TorchFile optimizer = io::TorchFile::open(saved.output() + "/zero/optimizer_state.pt");
  const io::ValueRef groups = optimizer.root_ref()["param_groups"];
  ASSERT_EQ(groups.list_size(), 3u);
  EXPECT_EQ(groups[std::size_t{0}]["step"].as_int(), 7);
  EXPECT_EQ(optimizer.root().find("state"), nullptr);
  EXPECT_EQ(optimizer.root().find("base_optimizer_state"), nullptr);
  EXPECT_EQ(optimizer.root().find("fp32_groups_flat"), nullptr);
  EXPECT_EQ(optimizer.root().find("loss_scaler") != nullptr, is_zero_optimizer(GetParam()));

  EXPECT_EQ(testing_support::read_file(saved.output() + "/mp_rank_00_model_states.pt"),
            testing_support::read_file(saved.folder() + "/mp_rank_00_model_states.pt"));
  EXPECT_EQ(testing_support::read_file(saved.dir.file("universal/latest_universal")),
            "global_step12_universal");
  std::vector<std::string> entries;
  for (const auto& entry : std::filesystem::directory_iterator(saved.dir.file("universal"))) {
    entries.push_back(entry.path().filename().string());
  }
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"global_step12_universal", "latest_universal"}));
  std::vector<std::string> top;
  for (const auto& entry : std::filesystem::directory_iterator(saved.output())) {
    top.push_back(entry.path().filename().string());
  }
  std::sort(top.begin(), top.end());
  EXPECT_EQ(top, (std::vector<std::string>{"mp_rank_00_model_states.pt", "zero"}));
}

INSTANTIATE_TEST_SUITE_P(Layouts, UniversalConvert,
                         ::testing::Values(OptimizerLayout::kFp32, OptimizerLayout::kFp16,
                                           OptimizerLayout::kFp16Zero1, OptimizerLayout::kBf16,
                                           OptimizerLayout::kFp32Zero),
                         [](const auto& param_info) {
                           std::string name(layout_name(param_info.param));
                           std::erase(name, '-');
                           return name;
                         });

TEST(UniversalConvertInput, ACheckpointRootIsReadThroughItsLatestFile) {
  const Saved saved(OptimizerLayout::kBf16);
  const UniversalSource source = inspect_universal_source(saved.dir.file("ckpt"));
  EXPECT_TRUE(source.tag_from_latest);
  EXPECT_EQ(source.tag, "global_step12");
  EXPECT_EQ(source.layout, OptimizerLayout::kBf16);
  EXPECT_EQ(source.original_vocab_size, 50);
  EXPECT_EQ(source.padded_vocab_size, 64);
  const UniversalSource direct = inspect_universal_source(saved.folder() + "/");
  EXPECT_FALSE(direct.tag_from_latest);
  EXPECT_EQ(direct.folder, source.folder);
  convert(saved.dir.file("ckpt"), saved.output(), 1);
  EXPECT_TRUE(std::filesystem::exists(saved.output() + "/zero/6.bias/exp_avg_sq.pt"));
}

TEST(UniversalConvertInput, BadInputFailsWithOneLineAndLeavesNothing) {
  const Saved saved(OptimizerLayout::kFp16Zero1);
  const std::string zero = saved.folder() + "/zero_pp_rank_0_mp_rank_00_optim_states.pt";
  const auto expect_error = [&](const std::string& input, const std::string& output,
                                const std::string& text) {
    const std::string message = convert_error(input, output);
    EXPECT_NE(message.find(text), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    // The output's parent may have been created; nothing is left inside it.
    const std::filesystem::path parent = saved.dir.file("universal");
    EXPECT_TRUE(!std::filesystem::exists(parent) || std::filesystem::is_empty(parent)) << message;
  };
  expect_error(saved.dir.file("nothing"), saved.output(), "no such folder");
  expect_error(saved.dir.path(), saved.output(), "neither a checkpoint folder");
  // The output may not replace the input.
  const std::string inside = convert_error(saved.folder(), saved.dir.file("ckpt"));
  EXPECT_NE(inside.find("holds the input checkpoint"), std::string::npos) << inside;

  const std::string original = testing_support::read_file(zero);
  std::string flipped = original;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x40);
  testing_support::write_file(zero, flipped);
  expect_error(saved.folder(), saved.output(), zero);

  std::filesystem::remove(zero);
  expect_error(saved.folder(), saved.output(),
               zero + ": missing from the checkpoint (T = 1 × P = 1 × D = 1");
  testing_support::write_file(zero, original);
  std::filesystem::copy_file(zero, saved.folder() + "/zero_pp_rank_1_mp_rank_00_optim_states.pt");
  expect_error(saved.folder(), saved.output(),
               "zero_pp_rank_1_mp_rank_00_optim_states.pt: unexpected");
}

TEST(UniversalConvertInput, CheckpointsWithoutOptimizerStateAreRefused) {
  for (const OptimizerLayout layout : {OptimizerLayout::kFp32, OptimizerLayout::kBf16}) {
    ScratchDir dir;
    OwnedState state(tiny_config(), layout);
    fill(state);
    state.state.args = tiny_args();
    SaveOptions options;
    options.save_optimizer = false;
    save_deepspeed_checkpoint(dir.file("ckpt"), state.state, options);
    const std::string message = convert_error(dir.file("ckpt"), dir.file("u/x"));
    EXPECT_NE(message.find("written with --no-save-optim?"), std::string::npos) << message;
  }
}

TEST(UniversalConvertInput, ModelShapeComesFromTheSavedArgs) {
  const Value args = tiny_args();
  const model::GptConfig config = config_from_saved_args(io::ValueRef(args, "args"), 64);
  EXPECT_EQ(config.num_layers, 2);
  EXPECT_EQ(config.hidden_size, 16);
  EXPECT_EQ(config.ffn(), 64);
  EXPECT_EQ(config.max_position_embeddings, 8);
  EXPECT_EQ(config.padded_vocab_size, 64);
  EXPECT_EQ(config.position_embedding, model::PositionEmbedding::kAbsolute);

  Value fields = *args.state();
  fields.set("position_embedding_type",
             Value::object("megatron.enums", "PositionEmbeddingType", {Value::integer(1)}, false));
  fields.set("max_position_embeddings", Value::none());
  const Value rotary = Value::namespace_object(fields);
  const model::GptConfig r = config_from_saved_args(io::ValueRef(rotary, "args"), 64);
  EXPECT_EQ(r.position_embedding, model::PositionEmbedding::kRotary);
  EXPECT_EQ(r.max_position_embeddings, 8);  // the sequence length

  fields.set("glu_activation", Value::string("geglu"));
  const Value glu = Value::namespace_object(fields);
  EXPECT_THROW(config_from_saved_args(io::ValueRef(glu, "args"), 64), base::Error);
}

}  // namespace
}  // namespace mds::ckpt
