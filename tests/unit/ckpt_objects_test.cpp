// The Python objects of DeepSpeed checkpoints, the Megatron RNG states and ds_config conversion.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.h"
#include "ckpt/deepspeed_objects.h"
#include "ckpt/json_value.h"
#include "ckpt/megatron_rng.h"
#include "ckpt/pt_builder.h"
#include "config/json_document.h"
#include "io/pickle_writer.h"
#include "io/torch_file.h"
#include "test_support.h"

namespace mds::ckpt {
namespace {

using io::Value;

TEST(CkptObjects, PickleAsPythonDoes) {
  // pickle.dumps([fragment_address(3, 5), set(), torch.Size([2, 3])], protocol=2), Python 3.11.
  const Value list = Value::list({fragment_address(3, 5), empty_set(), torch_size({2, 3})});
  EXPECT_EQ(testing_support::hex(io::write_pickle(list)),
            "80025d710028636465657073706565642e7574696c732e74656e736f725f667261676d656e740a667261"
            "676d656e745f616464726573730a7101298171027d71032858050000006e756d656c71044b0358050000"
            "00737461727471054b057562635f5f6275696c74696e5f5f0a7365740a71065d710785710852710963"
            "746f7263680a53697a650a710a4b024b0386710b85710c52710d652e");
  std::int64_t numel = 0;
  std::int64_t start = 0;
  read_fragment_address(io::ValueRef(list.items()[0], "f"), numel, start);
  EXPECT_EQ(numel, 3);
  EXPECT_EQ(start, 5);
  EXPECT_EQ(read_torch_size(io::ValueRef(list.items()[2], "s")), (tensor::Shape{2, 3}));
  EXPECT_THROW(read_torch_size(io::ValueRef(list.items()[1], "s")), base::Error);
}

TEST(CkptObjects, LossScalerRoundTrips) {
  const train::LossScalerState dynamic{true, 1024.0, 9, 4, 2.0, 200, 0.5, 3, 2, true, false};
  train::LossScalerState back;
  read_loss_scaler_object(io::ValueRef(loss_scaler_object(dynamic), "s"), back);
  EXPECT_EQ(back.cur_scale, 1024.0);
  EXPECT_EQ(back.cur_iter, 9);
  EXPECT_EQ(back.last_overflow_iter, 4);
  EXPECT_EQ(back.scale_window, 200);
  EXPECT_EQ(back.min_scale, 0.5);
  EXPECT_EQ(back.delayed_shift, 3);
  EXPECT_EQ(back.cur_hysteresis, 2);
  EXPECT_TRUE(back.consecutive_hysteresis);
  EXPECT_FALSE(back.raise_error_at_min_scale);
  const Value fixed = loss_scaler_object({false, 128.0});
  EXPECT_EQ(fixed.name(), "LossScaler");
  train::LossScalerState static_back;
  read_loss_scaler_object(io::ValueRef(fixed, "s"), static_back);
  EXPECT_FALSE(static_back.dynamic);
  EXPECT_EQ(static_back.cur_scale, 128.0);
}

TEST(CkptObjects, AdamGroupsKeepUpstreamKeyOrder) {
  const Value decay = adam_param_group({1e-3, 0.9, 0.95, 1e-8, 0.1}, true, 4, {0, 1});
  const Value no_decay = adam_param_group({1e-3, 0.9, 0.95, 1e-8, 0.1}, false, 4, {2});
  const auto keys = [](const Value& dict) {
    std::string out;
    for (const Value& key : dict.keys()) out += key.as_string() + " ";
    return out;
  };
  EXPECT_EQ(keys(decay), "lr bias_correction betas eps weight_decay step params ");
  EXPECT_EQ(keys(no_decay), "weight_decay lr bias_correction betas eps step params ");
  EXPECT_EQ(no_decay.find("weight_decay")->as_float(), 0.0);
  AdamHyper adam;
  std::int64_t step = 0;
  read_adam_param_group(io::ValueRef(decay, "g"), true, {0, 1}, adam, step);
  EXPECT_EQ(adam.beta2, 0.95);
  EXPECT_EQ(adam.weight_decay, 0.1);
  EXPECT_EQ(step, 4);
  try {
    read_adam_param_group(io::ValueRef(no_decay, "param_groups[2]"), false, {3}, adam, step);
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_EQ(std::string(e.what()), "param_groups[2].params: expected parameter ids [3]");
  }
}

TEST(CkptObjects, LrSchedulerReadsLegacyNames) {
  Value old = Value::dict();
  old.set("start_lr", Value::real(1e-3));
  old.set("warmup_iter", Value::integer(10));
  old.set("num_iters", Value::integer(20));
  old.set("decay_style", Value::string("linear"));
  old.set("end_iter", Value::integer(100));
  old.set("min_lr", Value::real(0.0));
  const train::LrSchedulerState s = read_lr_scheduler_dict(io::ValueRef(old, "lr_scheduler"));
  EXPECT_EQ(s.max_lr, 1e-3);
  EXPECT_EQ(s.warmup_steps, 10.0);
  EXPECT_EQ(s.num_steps, 20);
  EXPECT_EQ(s.decay_steps, 100);
}

TEST(CkptObjects, RngStatesAreMegatronsFreshlySeededOnes) {
  const std::string path = ::testing::TempDir() + "/rng_" + std::to_string(::getpid()) + ".pt";
  {
    PtBuilder builder("cpu");
    Value root = Value::dict();
    add_megatron_rng_states(root, 42, 0, 0, builder);
    builder.write(path, root);
  }
  const io::TorchFile file = io::TorchFile::open(path);
  std::remove(path.c_str());
  const io::ValueRef root = file.root_ref();
  check_megatron_rng_states(root);
  // Python: random.seed(42); random.getstate() -> (3, (2147483648, 3564348608, 1266698288, ...,
  // 3831079317, 624), None).
  const io::ValueRef words = root["random_rng_state"][1];
  EXPECT_EQ(words[0].as_int(), 2147483648);
  EXPECT_EQ(words[1].as_int(), 3564348608);
  EXPECT_EQ(words[2].as_int(), 1266698288);
  EXPECT_EQ(words[623].as_int(), 3831079317);
  EXPECT_EQ(words[624].as_int(), 624);
  // numpy: np.random.seed(42) -> keys [42, 3107752595, 1895908407, ..., 26719530], pos 624.
  const io::ValueRef np = root["np_rng_state"];
  const std::string& keys = np[1].value().state()->items()[4].as_bytes();
  ASSERT_EQ(keys.size(), 624u * 4);
  std::uint32_t first[2];
  std::memcpy(first, keys.data() + 4, sizeof first);
  EXPECT_EQ(first[0], 3107752595u);
  EXPECT_EQ(first[1], 1895908407u);
  EXPECT_EQ(np[2].as_int(), 624);
  // torch.manual_seed(42): the seed, left 1, seeded 1, then the same MT words widened to u64.
  const std::string cpu = file.tensor_bytes(root["torch_rng_state"].as_tensor());
  ASSERT_EQ(cpu.size(), 5056u);
  std::uint64_t word1 = 0;
  std::memcpy(&word1, cpu.data() + 24 + 8, 8);
  EXPECT_EQ(word1, 3107752595u);
  const std::string tracker =
      file.tensor_bytes(root["rng_tracker_states"]["model-parallel-rng"].as_tensor());
  std::uint64_t tracker_seed = 0;
  std::memcpy(&tracker_seed, tracker.data(), 8);
  EXPECT_EQ(tracker_seed, 42u + 2718u);
}

TEST(CkptObjects, JsonBecomesPythonValues) {
  const config::JsonValue json = config::parse_json(
      R"({"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 0.0}, "x": [null, "s"],
          "big": 18446744073709551615})",
      "ds.json");
  const Value v = json_to_value(json);
  EXPECT_EQ(v.keys()[0].as_string(), "train_batch_size");
  EXPECT_EQ(v.find("train_batch_size")->kind(), Value::Kind::kInt);
  EXPECT_EQ(v.find("fp16")->find("loss_scale")->kind(), Value::Kind::kFloat);
  EXPECT_TRUE(v.find("fp16")->find("enabled")->as_bool());
  EXPECT_EQ(v.find("x")->items()[1].as_string(), "s");
  EXPECT_EQ(v.find("big")->kind(), Value::Kind::kFloat);
}

}  // namespace
}  // namespace mds::ckpt
