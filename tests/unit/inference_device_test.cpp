// Where evaluate and generate run (tasks/inference_device.h): what keeps a run off a CUDA device,
// the --device / $MDS_DEVICE choice with its one-line errors, and the host staying as it was.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "base/log.h"
#include "tasks/inference_device.h"
#include "tensor/device_memory.h"
#include "test_support.h"

namespace mds::tasks {
namespace {

using testing_support::one_line_error;

config::PretrainArgs tiny_args(const std::string& device, bool given) {
  config::PretrainArgs args;
  args.hidden_size = 32;
  args.num_attention_heads = 2;
  args.device = device;
  if (given) args.given_flags.push_back("--device");
  return args;
}

// Sets $MDS_DEVICE for one test and restores what was there.
class DeviceEnv {
 public:
  explicit DeviceEnv(const char* value) {
    if (const char* old = std::getenv("MDS_DEVICE")) old_ = old;
    if (value != nullptr) {
      setenv("MDS_DEVICE", value, 1);
    } else {
      unsetenv("MDS_DEVICE");
    }
  }
  ~DeviceEnv() {
    if (old_.empty()) {
      unsetenv("MDS_DEVICE");
    } else {
      setenv("MDS_DEVICE", old_.c_str(), 1);
    }
  }

 private:
  std::string old_;
};

const base::Log& quiet_log() {
  static std::FILE* null = std::fopen("/dev/null", "w");
  static const base::Log log("test", null, null);
  return log;
}

TEST(InferenceDevice, HeadDimsWithoutKernelsStayOffTheDevice) {
  EXPECT_NE(inference_cuda_unsupported_reason(24).find(
                "head dim 24 has no CUDA attention kernel (8, 16, 32, 64, 96 or 128)"),
            std::string::npos);
  // Without CUDA no head dim has a kernel (and no device can be chosen anyway).
  EXPECT_EQ(inference_cuda_unsupported_reason(64).empty(), tensor::kCudaBuilt);
}

TEST(InferenceDevice, TheFlagAndTheEnvironmentChooseAsPretrainDoes) {
  const DeviceEnv env("tpu");
  // The flag wins over $MDS_DEVICE.
  EXPECT_EQ(choose_inference_device(tiny_args("cpu", true), 1, quiet_log()), tensor::Device{});
  EXPECT_NE(one_line_error([] {
              choose_inference_device(tiny_args("auto", false), 1, quiet_log());
            }).find("--device must be auto, cpu, cuda or cuda:N, got 'tpu'"),
            std::string::npos);
  EXPECT_NE(one_line_error([] {
              choose_inference_device(tiny_args("cuda:x", true), 1, quiet_log());
            }).find("--device must be auto, cpu, cuda or cuda:N, got 'cuda:x'"),
            std::string::npos);
}

TEST(InferenceDevice, CudaWithoutThatDeviceFailsWithOneLine) {
  const DeviceEnv env(nullptr);
  const int past_last = tensor::cuda_device_count();
  const std::string name = "cuda:" + std::to_string(past_last);
  // An index given is that device on every local rank, visible or not.
  for (const int local_rank : {0, 3}) {
    EXPECT_NE(one_line_error([&] {
                choose_inference_device(tiny_args(name, true), local_rank, quiet_log());
              }).find("--device " + name + ": "),
              std::string::npos);
  }
  // auto without a usable device is the host, on any local rank.
  if (past_last == 0) {
    EXPECT_EQ(choose_inference_device(tiny_args("auto", false), 0, quiet_log()), tensor::Device{});
    EXPECT_EQ(choose_inference_device(tiny_args("auto", false), 5, quiet_log()), tensor::Device{});
  }
}

TEST(InferenceDevice, TheHostLeavesTheModelAsLoaded) {
  InferenceModel model;
  model.options.config.num_layers = 1;
  model.options.config.hidden_size = 8;
  model.options.config.num_attention_heads = 2;
  model.options.config.seq_length = 4;
  model.options.config.max_position_embeddings = 4;
  model.options.config.padded_vocab_size = 16;
  model.table = std::make_unique<model::ParamTable>(model::ParamTable::build(model.options.config));
  model.params = std::make_unique<model::ParamBuffer>(*model.table, tensor::DType::kFloat32);
  const void* weights = model.params->flat().raw();
  place_on_device(model, tensor::Device{});
  EXPECT_EQ(model.params->flat().raw(), weights);
  EXPECT_EQ(model.device, nullptr);
}

}  // namespace
}  // namespace mds::tasks
