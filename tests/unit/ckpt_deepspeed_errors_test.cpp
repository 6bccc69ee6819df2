// DeepSpeed pipeline checkpoints that cannot be loaded fail with one line naming the file (and
// the key), and leave the state untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt_test_state.h"
#include "io/zip_store.h"
#include "test_support.h"

namespace mds::ckpt {
namespace {

using testing::fill;
using testing::OwnedState;
using testing::tiny_config;
using testing_support::ScratchDir;

class BrokenCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    OwnedState saved(tiny_config(), OptimizerLayout::kBf16);
    fill(saved);
    save_deepspeed_checkpoint(dir_.path(), saved.state);
  }

  std::string path(const std::string& name) const { return dir_.file("global_step12/" + name); }

  // The load error, checking that it is one line and that nothing was written.
  std::string error(const model::GptConfig& config = tiny_config()) {
    OwnedState into(config, OptimizerLayout::kBf16);
    std::string message;
    try {
      load_deepspeed_checkpoint(dir_.path(), "global_step12", into.state);
    } catch (const base::Error& e) {
      message = e.what();
    }
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_TRUE(testing::all_zero(into.state.params));
    EXPECT_TRUE(testing::all_zero(into.state.master));
    EXPECT_EQ(into.state.global_steps, 0);
    return message;
  }

  ScratchDir dir_;
};

TEST_F(BrokenCheckpoint, WrongShapeNamesFileKeyAndShapes) {
  const std::string message = error(tiny_config(model::PositionEmbedding::kAbsolute, 32));
  EXPECT_EQ(message, path("layer_03-model_00-model_states.pt") +
                         ": mlp.dense_h_to_4h.weight: expected shape [32, 16], found [64, 16]");
}

TEST_F(BrokenCheckpoint, ExtraOrMissingParametersAreNamed) {
  // Saved with absolute positions; an alibi model has no position table.
  const std::string message = error(tiny_config(model::PositionEmbedding::kAlibi));
  EXPECT_EQ(message, path("layer_01-model_00-model_states.pt") +
                         ": unexpected key 'position_embeddings.weight' (a different model "
                         "configuration?)");
}

TEST_F(BrokenCheckpoint, TruncatedFileNamesTheFile) {
  const std::string file = path("layer_04-model_00-model_states.pt");
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  const std::string message = error();
  EXPECT_EQ(message.rfind(file, 0), 0u) << message;
}

TEST_F(BrokenCheckpoint, FlippedStorageByteFailsItsCrc) {
  const std::string file = path("bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt");
  std::string bytes = testing_support::read_file(file);
  const auto entries = io::read_zip_directory(bytes, file);
  const auto data = std::find_if(entries.begin(), entries.end(),
                                 [](const io::ZipEntry& e) { return e.name == "archive/data/3"; });
  ASSERT_NE(data, entries.end());
  bytes[data->data_offset + 5] ^= 0x10;
  testing_support::write_file(file, bytes);
  EXPECT_EQ(error(), file + ": record archive/data/3 fails its CRC check");
}

TEST_F(BrokenCheckpoint, MissingFileIsNamed) {
  const std::string file = path("layer_06-model_00-model_states.pt");
  std::filesystem::remove(file);
  const std::string message = error();
  EXPECT_EQ(message.rfind(file + ": missing", 0), 0u) << message;
}

TEST_F(BrokenCheckpoint, LayerFileOfAnotherDtypeIsRefused) {
  OwnedState other(tiny_config(), OptimizerLayout::kFp16);
  fill(other);
  save_deepspeed_checkpoint(dir_.path(), other.state);  // same tag, fp16 weights
  EXPECT_EQ(error(), path("layer_01-model_00-model_states.pt") +
                         ": word_embeddings.weight: expected dtype bfloat16, found float16");
}

TEST_F(BrokenCheckpoint, MissingFolderNamedByLatest) {
  std::filesystem::remove_all(dir_.file("global_step12"));
  EXPECT_EQ(error(), dir_.file("global_step12") + ": no such checkpoint folder");
}

TEST(DeepSpeedCheckpointErrors, BuffersMustMatchTheLayout) {
  ScratchDir dir;
  OwnedState state(tiny_config(), OptimizerLayout::kBf16);
  state.state.layout = OptimizerLayout::kFp16;
  try {
    save_deepspeed_checkpoint(dir.path(), state.state);
    FAIL() << "saved bf16 buffers as an fp16 layout";
  } catch (const base::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "saving checkpoint: the params buffer holds bfloat16, expected float16");
  }
  EXPECT_TRUE(dir.files().empty());
}

}  // namespace
}  // namespace mds::ckpt
