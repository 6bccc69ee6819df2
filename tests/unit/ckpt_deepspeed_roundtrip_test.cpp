// DeepSpeed pipeline checkpoints: save then load into fresh buffers gives back every byte and
// counter, for each optimizer layout; file inventory, latest marker and the load options.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/deepspeed_layout.h"
#include "ckpt_test_state.h"
#include "io/torch_file.h"
#include "test_support.h"

namespace mds::ckpt {
namespace {

using testing::fill;
using testing::OwnedState;
using testing::same_bytes;
using testing::tiny_config;
using testing_support::ScratchDir;

std::string load_error(const std::string& dir, OwnedState& into, const LoadOptions& options = {}) {
  try {
    load_deepspeed_checkpoint(dir, "global_step12", into.state, options);
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

void expect_same_scalars(const TrainingState& a, const TrainingState& b) {
  EXPECT_EQ(a.adam_step, b.adam_step);
  EXPECT_EQ(a.adam.lr, b.adam.lr);
  EXPECT_EQ(a.adam.beta1, b.adam.beta1);
  EXPECT_EQ(a.adam.beta2, b.adam.beta2);
  EXPECT_EQ(a.adam.eps, b.adam.eps);
  EXPECT_EQ(a.adam.weight_decay, b.adam.weight_decay);
  EXPECT_EQ(a.lr_scheduler.max_lr, b.lr_scheduler.max_lr);
  EXPECT_EQ(a.lr_scheduler.warmup_steps, b.lr_scheduler.warmup_steps);
  EXPECT_EQ(a.lr_scheduler.num_steps, b.lr_scheduler.num_steps);
  EXPECT_EQ(a.lr_scheduler.warmup_tokens, b.lr_scheduler.warmup_tokens);
  EXPECT_EQ(a.lr_scheduler.num_tokens, b.lr_scheduler.num_tokens);
  EXPECT_EQ(a.lr_scheduler.decay_style, b.lr_scheduler.decay_style);
  EXPECT_EQ(a.lr_scheduler.decay_steps, b.lr_scheduler.decay_steps);
  EXPECT_EQ(a.lr_scheduler.min_lr, b.lr_scheduler.min_lr);
  EXPECT_EQ(a.iteration, b.iteration);
  EXPECT_EQ(a.global_steps, b.global_steps);
  EXPECT_EQ(a.global_samples, b.global_samples);
  EXPECT_EQ(a.skipped_steps, b.skipped_steps);
  EXPECT_EQ(a.consumed_train_samples, b.consumed_train_samples);
  EXPECT_EQ(a.consumed_valid_samples, b.consumed_valid_samples);
  EXPECT_EQ(a.consumed_train_tokens, b.consumed_train_tokens);
}

void expect_same_scaler(const train::LossScalerState& a, const train::LossScalerState& b,
                        bool all_fields) {
  EXPECT_EQ(a.dynamic, b.dynamic);
  EXPECT_EQ(a.cur_scale, b.cur_scale);
  EXPECT_EQ(a.cur_iter, b.cur_iter);
  EXPECT_EQ(a.last_overflow_iter, b.last_overflow_iter);
  EXPECT_EQ(a.scale_factor, b.scale_factor);
  EXPECT_EQ(a.scale_window, b.scale_window);
  if (!all_fields) return;
  EXPECT_EQ(a.min_scale, b.min_scale);
  EXPECT_EQ(a.delayed_shift, b.delayed_shift);
  EXPECT_EQ(a.cur_hysteresis, b.cur_hysteresis);
  EXPECT_EQ(a.consecutive_hysteresis, b.consecutive_hysteresis);
  EXPECT_EQ(a.raise_error_at_min_scale, b.raise_error_at_min_scale);
}

class RoundTrip : public ::testing::TestWithParam<OptimizerLayout> {};

TEST_P(RoundTrip, FreshBuffersGetEveryByteBack) {
  const OptimizerLayout layout = GetParam();
  ScratchDir dir;
  OwnedState saved(tiny_config(), layout);
  fill(saved);
  save_deepspeed_checkpoint(dir.path(), saved.state);

  EXPECT_EQ(testing_support::read_file(dir.file("latest")), "global_step12");
  std::vector<std::string> expected = {
      "layer_01-model_00-model_states.pt", "layer_03-model_00-model_states.pt",
      "layer_04-model_00-model_states.pt", "layer_06-model_00-model_states.pt",
      "mp_rank_00_model_states.pt"};
  if (has_zero_file(layout)) expected.push_back(zero_file_name(layout));
  std::sort(expected.begin(), expected.end());
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("global_step12"))) {
    files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, expected);
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"global_step12", "latest"}));

  ASSERT_EQ(read_latest_tag(dir.path()), "global_step12");
  OwnedState loaded(tiny_config(), layout);
  loaded.state.loss_scaler = {};
  const LoadedCheckpoint info =
      load_deepspeed_checkpoint(dir.path(), "global_step12", loaded.state);
  EXPECT_TRUE(same_bytes(loaded.state.params, saved.state.params));
  if (layout != OptimizerLayout::kFp32) {
    EXPECT_TRUE(same_bytes(loaded.state.master, saved.state.master));
  }
  EXPECT_TRUE(same_bytes(loaded.state.exp_avg, saved.state.exp_avg));
  EXPECT_TRUE(same_bytes(loaded.state.exp_avg_sq, saved.state.exp_avg_sq));
  expect_same_scalars(loaded.state, saved.state);
  if (layout == OptimizerLayout::kFp16Zero1 || layout == OptimizerLayout::kFp16) {
    expect_same_scaler(loaded.state.loss_scaler, saved.state.loss_scaler,
                       layout == OptimizerLayout::kFp16Zero1);
  }
  if (layout != OptimizerLayout::kFp32) {
    EXPECT_EQ(loaded.state.clip_grad, 1.0);
  }
  EXPECT_EQ(info.ds_version, "0.8.3");
  EXPECT_EQ(info.ds_config, saved.state.ds_config);
  const io::Value* iteration = info.args.state()->find("iteration");
  ASSERT_NE(iteration, nullptr);
  EXPECT_EQ(iteration->as_int(), 12);
  EXPECT_EQ(info.args.state()->find("consumed_valid_samples")->as_int(), 32);
  EXPECT_EQ(info.args.state()->find("num_layers")->as_int(), 2);
}

INSTANTIATE_TEST_SUITE_P(Layouts, RoundTrip,
                         ::testing::Values(OptimizerLayout::kFp32, OptimizerLayout::kFp16,
                                           OptimizerLayout::kFp16Zero1, OptimizerLayout::kBf16),
                         [](const auto& param_info) {
                           std::string name(layout_name(param_info.param));
                           std::erase(name, '-');
                           return name;
                         });

// As DeepSpeed's engine: ZeRO files named for the other precision (deepspeed_to_deepspeed.py
// writes a bf16 run's without the "bf16_" prefix) are read with a warning, bytes unchanged.
TEST(DeepSpeedCheckpoint, ZeroFilesOfTheOtherPrefixAreReadWithAWarning) {
  for (const OptimizerLayout layout : {OptimizerLayout::kBf16, OptimizerLayout::kFp16Zero1}) {
    SCOPED_TRACE(std::string(layout_name(layout)));
    ScratchDir dir;
    OwnedState saved(tiny_config(), layout);
    fill(saved);
    save_deepspeed_checkpoint(dir.path(), saved.state);
    const std::string name = zero_file_name(layout);
    const std::string other = layout == OptimizerLayout::kBf16 ? name.substr(5) : "bf16_" + name;
    std::filesystem::rename(dir.file("global_step12/" + name), dir.file("global_step12/" + other));
    OwnedState loaded(tiny_config(), layout);
    const LoadedCheckpoint info =
        load_deepspeed_checkpoint(dir.path(), "global_step12", loaded.state);
    EXPECT_TRUE(same_bytes(loaded.state.master, saved.state.master));
    EXPECT_TRUE(same_bytes(loaded.state.exp_avg_sq, saved.state.exp_avg_sq));
    ASSERT_EQ(info.warnings.size(), 1u);
    EXPECT_NE(
        info.warnings[0].find(layout == OptimizerLayout::kBf16
                                  ? "Loading fp16 zero checkpoints into bf16 training engine"
                                  : "Loading bf16 zero checkpoints into fp16 training engine"),
        std::string::npos);
  }
}

TEST(DeepSpeedCheckpoint, MissingLatestMeansStartFromScratch) {
  ScratchDir dir;
  EXPECT_EQ(read_latest_tag(dir.path()), std::nullopt);
  EXPECT_EQ(read_latest_tag(dir.file("not_there")), std::nullopt);
  testing_support::write_file(dir.file("latest"), "global_step5\n");
  EXPECT_EQ(read_latest_tag(dir.path()), "global_step5");
  testing_support::write_file(dir.file("latest"), " \n");
  EXPECT_THROW(read_latest_tag(dir.path()), base::Error);
}

TEST(DeepSpeedCheckpoint, RotaryLayerFilesCarryInvFreq) {
  ScratchDir dir;
  const model::GptConfig config = tiny_config(model::PositionEmbedding::kRotary);
  OwnedState saved(config, OptimizerLayout::kBf16);
  fill(saved);
  save_deepspeed_checkpoint(dir.path(), saved.state);
  const auto layer =
      io::TorchFile::open(dir.file("global_step12/layer_03-model_00-model_states.pt"));
  const io::Value& root = layer.root();
  ASSERT_EQ(root.size(), 13u);  // 12 parameters and the buffer, after the attention dense bias
  EXPECT_EQ(root.keys()[5].as_string(), "self_attention.dense.bias");
  EXPECT_EQ(root.keys()[6].as_string(), "self_attention.rotary_emb.inv_freq");
  const io::TensorRef& inv_freq = root.items()[6].as_tensor();
  EXPECT_EQ(inv_freq.shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(inv_freq.dtype, tensor::DType::kBFloat16);
  EXPECT_EQ(layer.tensor_bytes(inv_freq).substr(0, 2), std::string("\x80\x3f", 2));  // 1.0
  const auto model = io::TorchFile::open(dir.file("global_step12/mp_rank_00_model_states.pt"));
  const io::Value& names = *model.root().find("buffer_names");
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names.items()[1].as_string(), "4.self_attention.rotary_emb.inv_freq");

  OwnedState loaded(config, OptimizerLayout::kBf16);
  load_deepspeed_checkpoint(dir.path(), "global_step12", loaded.state);
  EXPECT_TRUE(same_bytes(loaded.state.params, saved.state.params));
  EXPECT_TRUE(same_bytes(loaded.state.master, saved.state.master));
}

TEST(DeepSpeedCheckpoint, NoLoadOptimKeepsMomentsAndTakesMastersFromTheFile) {
  ScratchDir dir;
  OwnedState saved(tiny_config(), OptimizerLayout::kBf16);
  fill(saved);
  save_deepspeed_checkpoint(dir.path(), saved.state);
  OwnedState loaded(tiny_config(), OptimizerLayout::kBf16);
  LoadOptions options;
  options.load_optimizer = false;
  loaded.state.adam_step = 3;
  load_deepspeed_checkpoint(dir.path(), "global_step12", loaded.state, options);
  EXPECT_TRUE(same_bytes(loaded.state.params, saved.state.params));
  EXPECT_TRUE(same_bytes(loaded.state.master, saved.state.master));  // load_from_fp32_weights
  EXPECT_TRUE(testing::all_zero(loaded.state.exp_avg));
  EXPECT_EQ(loaded.state.adam_step, 3);
  EXPECT_EQ(loaded.state.global_steps, 12);
}

TEST(DeepSpeedCheckpoint, WeightsOnlySaveNeedsNoLoadOptimAndDerivesMasters) {
  ScratchDir dir;
  OwnedState saved(tiny_config(), OptimizerLayout::kFp16Zero1);
  fill(saved);
  SaveOptions save;
  save.save_optimizer = false;
  save.save_rng = false;
  save_deepspeed_checkpoint(dir.path(), saved.state, save);
  EXPECT_FALSE(
      std::filesystem::exists(dir.file("global_step12/" + zero_file_name(saved.state.layout))));

  OwnedState loaded(tiny_config(), OptimizerLayout::kFp16Zero1);
  const std::string error = load_error(dir.path(), loaded, {true, false, false});
  EXPECT_NE(error.find("zero_pp_rank_0_mp_rank_00_optim_states.pt: missing"), std::string::npos)
      << error;
  EXPECT_NE(load_error(dir.path(), loaded, {false, true, false}).find("random_rng_state"),
            std::string::npos);
  load_deepspeed_checkpoint(dir.path(), "global_step12", loaded.state, {false, false, false});
  EXPECT_TRUE(same_bytes(loaded.state.params, saved.state.params));
  // The masters are the partitions of the widened 16-bit weights.
  const auto* params = static_cast<const tensor::Float16*>(saved.state.params.raw());
  model::ParamBuffer widened(loaded.table, tensor::DType::kFloat32);
  for (std::int64_t i = 0; i < saved.state.params.numel(); ++i) {
    widened.flat().data<float>()[i] = tensor::to_float(params[i]);
  }
  tensor::Buffer expected(loaded.state.master.bytes(), tensor::Device{});
  const tensor::Tensor expected_master =
      expected.as(tensor::DType::kFloat32, tensor::Shape{loaded.state.master.numel()});
  testing::store(loaded, widened, expected_master);
  EXPECT_TRUE(same_bytes(loaded.state.master, expected_master));
}

TEST(DeepSpeedCheckpoint, FinetuneRestartsIterationButKeepsConsumedSamples) {
  ScratchDir dir;
  OwnedState saved(tiny_config(), OptimizerLayout::kFp32);
  fill(saved);
  save_deepspeed_checkpoint(dir.path(), saved.state);
  OwnedState loaded(tiny_config(), OptimizerLayout::kFp32);
  LoadOptions options;
  options.finetune = true;
  load_deepspeed_checkpoint(dir.path(), "global_step12", loaded.state, options);
  EXPECT_EQ(loaded.state.iteration, 0);
  EXPECT_EQ(loaded.state.consumed_train_tokens, 0);
  EXPECT_EQ(loaded.state.consumed_train_samples, 96);  // Megatron reads these from args anyway
  EXPECT_EQ(loaded.state.global_steps, 12);
  EXPECT_TRUE(same_bytes(loaded.state.params, saved.state.params));
}

TEST(DeepSpeedCheckpoint, ReplacesAnExistingTagFolderAndLeavesNoTemporary) {
  ScratchDir dir;
  OwnedState first(tiny_config(), OptimizerLayout::kFp16);
  fill(first);
  std::filesystem::create_directories(dir.file("global_step12"));
  testing_support::write_file(dir.file("global_step12/stale.txt"), "old");
  // A crashed earlier attempt's temporary is cleaned up too.
  std::filesystem::create_directories(dir.file(".global_step12.tmp.1"));
  save_deepspeed_checkpoint(dir.path(), first.state);
  EXPECT_FALSE(std::filesystem::exists(dir.file("global_step12/stale.txt")));
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"global_step12", "latest"}));

  // Saving the same tag again with other weights replaces the folder's content.
  static_cast<tensor::Float16*>(first.state.params.raw())[0] = tensor::to_float16(0.5f);
  save_deepspeed_checkpoint(dir.path(), first.state);
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"global_step12", "latest"}));
  OwnedState loaded(tiny_config(), OptimizerLayout::kFp16);
  load_deepspeed_checkpoint(dir.path(), "global_step12", loaded.state);
  EXPECT_TRUE(same_bytes(loaded.state.params, first.state.params));

  first.state.global_steps = 13;
  save_deepspeed_checkpoint(dir.path(), first.state);
  EXPECT_EQ(read_latest_tag(dir.path()), "global_step13");
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"global_step12", "global_step13", "latest"}));
}

}  // namespace
}  // namespace mds::ckpt
