// Devices where no GPU is needed: host copies, what asking for CUDA gives in a build without CUDA
// or on a machine without a device (one line, never a crash), the activation plan of a CUDA
// model (no [b, n, s, s] tensor), and how pretrain chooses its device.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/activation_plan.h"
#include "ops/device_context.h"
#include "tensor/buffer.h"
#include "tensor/device_memory.h"
#include "test_support.h"
#include "train/device_choice.h"

namespace mds {
namespace {

using tensor::Device;
using tensor::DeviceKind;
using tensor::DType;
using tensor::Tensor;

constexpr Device kCuda0{DeviceKind::kCuda, 0};

// One past the last visible device: a CUDA device no process here can have, on any machine.
Device missing_cuda_device() {
  return Device{DeviceKind::kCuda, static_cast<int>(tensor::cuda_device_count())};
}

TEST(DeviceMemory, NamesAndCounts) {
  EXPECT_EQ(tensor::device_name(Device{}), "cpu");
  EXPECT_EQ(tensor::device_name(Device{DeviceKind::kCuda, 3}), "cuda:3");
  EXPECT_GE(tensor::cuda_device_count(), 0);
  if (!tensor::kCudaBuilt) {
    EXPECT_EQ(tensor::cuda_device_count(), 0);
  }
}

TEST(DeviceMemory, HostCopyChecksDtypeAndCount) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b(6);
  tensor::copy(Tensor(b.data(), DType::kFloat32, {3, 2}), Tensor(a.data(), DType::kFloat32, {6}));
  EXPECT_EQ(a, b);
  std::vector<std::int32_t> ints(6);
  EXPECT_NE(testing_support::one_line_error([&] {
              tensor::copy(Tensor(ints.data(), DType::kInt32, {6}),
                           Tensor(a.data(), DType::kFloat32, {6}));
            }).find("dtypes and element counts must be equal"),
            std::string::npos);
  EXPECT_NE(testing_support::one_line_error([&] {
              tensor::copy(Tensor(b.data(), DType::kFloat32, {5}),
                           Tensor(a.data(), DType::kFloat32, {6}));
            }).find("tensor::copy: float32 [6] on cpu into float32 [5] on cpu"),
            std::string::npos);
  // Copies onto themselves and empty copies do nothing.
  tensor::copy(Tensor(a.data(), DType::kFloat32, {6}), Tensor(a.data(), DType::kFloat32, {6}));
  tensor::copy(Tensor(nullptr, DType::kFloat32, {0}), Tensor(nullptr, DType::kFloat32, {0}));
  EXPECT_EQ(a, b);
}

TEST(DeviceMemory, AMissingCudaDeviceFailsWithOneLine) {
  const Device missing = missing_cuda_device();
  const std::string name = tensor::device_name(missing);
  const std::string buffer =
      testing_support::one_line_error([&] { tensor::Buffer(1024, missing); });
  std::vector<float> host(4);
  const std::string copy = testing_support::one_line_error([&] {
    tensor::copy(Tensor(host.data(), DType::kFloat32, {4}),
                 Tensor(host.data() + 1, DType::kFloat32, {4}, missing));
  });
  const std::string context =
      testing_support::one_line_error([&] { const ops::DeviceContext cuda(missing); });
  if (!tensor::kCudaBuilt) {
    EXPECT_NE(buffer.find(name + " was asked for, but this build has no CUDA backend"),
              std::string::npos)
        << buffer;
    EXPECT_NE(copy.find("this build has no CUDA backend"), std::string::npos) << copy;
    EXPECT_NE(context.find("needs the CUDA backend, which this build does not have"),
              std::string::npos)
        << context;
  } else {
    const std::string sees =
        "this process sees " + std::to_string(tensor::cuda_device_count()) + " CUDA device";
    EXPECT_NE(buffer.find(name + " does not exist: " + sees), std::string::npos) << buffer;
    EXPECT_NE(copy.find("cuda"), std::string::npos) << copy;
    EXPECT_NE(context.find("cannot run on " + name + ": " + sees), std::string::npos) << context;
  }
}

TEST(DeviceContext, HostContextHasNoDeviceState) {
  ops::DeviceContext host;
  EXPECT_FALSE(host.is_cuda());
  EXPECT_EQ(host.device(), Device{});
  host.synchronize();  // nothing queued, nothing to wait for
  EXPECT_NE(testing_support::one_line_error([&] {
              host.cuda();
            }).find("the DeviceContext of cpu has no CUDA resources"),
            std::string::npos);
  const ops::DeviceContext explicit_host(Device{});
  EXPECT_FALSE(explicit_host.is_cuda());
  ops::DeviceContext moved(std::move(host));
  EXPECT_FALSE(moved.is_cuda());
  // The fp32 GEMM choice travels with the context (the host's GEMMs ignore it).
  EXPECT_EQ(moved.fp32_matmul(), ops::Fp32Matmul::kFp32);
  ops::DeviceContext tf32(Device{}, ops::Fp32Matmul::kTf32);
  EXPECT_EQ(tf32.fp32_matmul(), ops::Fp32Matmul::kTf32);
  moved = std::move(tf32);
  EXPECT_EQ(moved.fp32_matmul(), ops::Fp32Matmul::kTf32);
}

// The CUDA plan swaps every layer's [b, n, s, s] probabilities for a [b, n, s] lse and drops the
// two [b, n, s, s] workspaces; nothing else changes. Planned without allocating: no device needed.
TEST(ActivationPlan, CudaKeepsOneLsePerRowInsteadOfProbabilities) {
  model::ModelOptions options;
  model::GptConfig& c = options.config;
  c.num_layers = 3;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.seq_length = 96;
  c.max_position_embeddings = 96;
  c.padded_vocab_size = 128;
  options.micro_batch_size = 2;
  const std::int64_t b = 2, n = 4, s = 96, layers = 3;
  const auto bytes = [](std::int64_t elements) { return static_cast<double>(elements) * 4.0; };
  for (const bool checkpointed : {false, true}) {
    SCOPED_TRACE(checkpointed);
    options.checkpoint_activations = checkpointed;
    // Sets of layer activations: one per layer, or one per position of a recomputed chunk.
    const std::int64_t sets = checkpointed ? 1 : layers;
    const double host = static_cast<double>(model::Activations::planned_bytes(options, 1));
    const double cuda = static_cast<double>(model::Activations::planned_bytes(options, 1, kCuda0));
    const double expected = bytes(sets * (b * n * s * s - b * n * s)) + bytes(2 * b * n * s * s);
    // Every slot starts on a 64-byte boundary: each swapped slot may move the total by < 64.
    EXPECT_NEAR(host - cuda, expected, 64.0 * static_cast<double>(sets + 2));
    EXPECT_LT(cuda, host - bytes(b * n * s * s));
  }
}

// With attention dropout and 16-bit activations at head dim 64 or 128 (the tensor-core kernels,
// which read them) a CUDA plan adds each layer's keep bits, [b, n, s, 2·⌈s/64⌉] int32 words;
// nowhere else (no dropout, fp32, another head dim, the host).
TEST(ActivationPlan, CudaKeepsTheAttentionDropoutBitsWhereTheBackwardReadsThem) {
  model::ModelOptions options;
  model::GptConfig& c = options.config;
  c.num_layers = 3;
  c.hidden_size = 256;
  c.num_attention_heads = 4;  // head dim 64
  c.seq_length = 100;
  c.max_position_embeddings = 100;
  c.padded_vocab_size = 128;
  options.micro_batch_size = 2;
  options.activation_dtype = tensor::DType::kBFloat16;
  const auto growth = [&](tensor::Device device) {
    model::ModelOptions without = options;
    without.attention_dropout = 0.0f;
    return static_cast<double>(model::Activations::planned_bytes(options, 1, device)) -
           static_cast<double>(model::Activations::planned_bytes(without, 1, device));
  };
  const double keep_bytes = 3.0 * (2 * 4 * 100 * 4) * 4;  // layers · b·n·s·words · 4 bytes
  // Each added slot starts on a 64-byte boundary.
  EXPECT_NEAR(growth(kCuda0), tensor::kCudaBuilt ? keep_bytes : 0.0, 3 * 64.0);
  EXPECT_EQ(growth(tensor::Device{}), 0.0);
  options.activation_dtype = tensor::DType::kFloat32;
  EXPECT_EQ(growth(kCuda0), 0.0);
  options.activation_dtype = tensor::DType::kFloat16;
  c.num_attention_heads = 8;  // head dim 32
  EXPECT_EQ(growth(kCuda0), 0.0);
}

TEST(DeviceChoice, ParsesTheFlag) {
  EXPECT_EQ(train::parse_device_flag("auto").request, train::DeviceRequest::kAuto);
  EXPECT_EQ(train::parse_device_flag("cpu").request, train::DeviceRequest::kCpu);
  EXPECT_EQ(train::parse_device_flag("cuda").request, train::DeviceRequest::kCuda);
  EXPECT_EQ(train::parse_device_flag("cuda").index, 0);
  EXPECT_EQ(train::parse_device_flag("cuda:3").index, 3);
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "CPU", "cuda0"}) {
    EXPECT_EQ(testing_support::one_line_error([&] { train::parse_device_flag(bad); }),
              std::string("--device must be auto, cpu, cuda or cuda:N, got '") + bad + "'");
  }
}

// Every optimizer trains on devices on any grid: only the model's attention can keep a run off.
TEST(DeviceChoice, SaysWhatKeepsARunOffCuda) {
  EXPECT_EQ(train::cuda_unsupported_reason(24),
            "head dim 24 has no CUDA flash-attention kernel (8, 16, 32, 64, 96 or 128)");
  EXPECT_EQ(train::cuda_unsupported_reason(64).empty(), tensor::kCudaBuilt);
}

TEST(DeviceChoice, EachLocalRankTakesItsOwnDeviceUnlessOneIsNamed) {
  using train::DeviceRequest;
  using train::parse_device_flag_for_rank;
  EXPECT_EQ(parse_device_flag_for_rank("cuda", 3, 2).index, 1);
  EXPECT_EQ(parse_device_flag_for_rank("cuda", 3, 2).request, DeviceRequest::kCuda);
  EXPECT_EQ(parse_device_flag_for_rank("auto", 5, 8).index, 5);
  EXPECT_EQ(parse_device_flag_for_rank("auto", 5, 8).request, DeviceRequest::kAuto);
  EXPECT_EQ(parse_device_flag_for_rank("cuda:1", 3, 8).index, 1);  // the same N on every rank
  EXPECT_EQ(parse_device_flag_for_rank("cuda:0", 3, 8).index, 0);
  EXPECT_EQ(parse_device_flag_for_rank("cuda", 3, 0).index, 0);  // no device: choose_device says so
  EXPECT_EQ(parse_device_flag_for_rank("cpu", 3, 2).request, DeviceRequest::kCpu);
}

TEST(DeviceChoice, AutoPrefersCudaForRunsItCanDo) {
  using train::choose_device;
  using train::DeviceRequest;
  const train::DeviceFlag automatic{DeviceRequest::kAuto, 0}, cpu{DeviceRequest::kCpu, 0};
  const train::DeviceFlag cuda{DeviceRequest::kCuda, 0}, cuda1{DeviceRequest::kCuda, 1};
  // auto: no device → host, silently; a device and a supported run → cuda:0; a device and an
  // unsupported run → host with a note saying why.
  EXPECT_EQ(choose_device(automatic, 0, "").device, Device{});
  EXPECT_EQ(choose_device(automatic, 0, "").note, "");
  EXPECT_EQ(choose_device(automatic, 2, "").device, kCuda0);
  const train::DeviceChoice fallback = choose_device(automatic, 1, "bf16 … so far");
  EXPECT_EQ(fallback.device, Device{});
  EXPECT_EQ(fallback.note, "training on the CPU although a CUDA device is present: bf16 … so far");
  // cpu: always the host.
  EXPECT_EQ(choose_device(cpu, 4, "").device, Device{});
  // cuda: the device, or one line saying why not.
  EXPECT_EQ(choose_device(cuda1, 2, "").device, (Device{DeviceKind::kCuda, 1}));
  EXPECT_EQ(testing_support::one_line_error([&] { choose_device(cuda, 1, "ZeRO stage 1 …"); }),
            "--device cuda:0: ZeRO stage 1 … (use --device cpu)");
  EXPECT_EQ(testing_support::one_line_error([&] { choose_device(cuda1, 1, ""); }),
            tensor::kCudaBuilt
                ? "--device cuda:1: this process sees 1 CUDA device(s)"
                : "--device cuda:1: this build has no CUDA backend (BUILD_CUDA=OFF)");
  EXPECT_NE(testing_support::one_line_error([&] {
              choose_device(cuda, 0, "");
            }).find("--device cuda:0: "),
            std::string::npos);
}

}  // namespace
}  // namespace mds
