// Device dispatch of the public ops, where no GPU is needed: every op taking a DeviceContext
// refuses tensors that are not where the context runs, or that sit on different devices, with one
// line naming the op, before it reads any memory. The "CUDA" tensors here are host memory with a
// CUDA label; they are never dereferenced. tests/gpu/ops_dispatch_test.cpp runs the same ops on a
// device against their host results.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#if defined(MDS_WITH_CUDA)
#include "kernels/attention.h"
#endif
#include "ops/adam.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/gradients.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"
#include "tensor/device_memory.h"
#include "test_support.h"

namespace mds {
namespace {

using ops::DeviceContext;
using tensor::Tensor;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};

// Calls one op with `first` as its first tensor argument and `rest` for all the others.
using Call = std::function<void(const DeviceContext&, Tensor first, Tensor rest)>;

struct OpCase {
  const char* name;
  Call call;
  bool one_tensor = false;  // cannot mix devices
};

std::vector<OpCase> every_op() {
  const ops::DropoutStream drop{0.1f, 1, 2};
  const ops::AdamWConfig adam;
  return {
      {"add", [](const DeviceContext& c, Tensor f, Tensor r) { ops::add(c, f, r, r); }},
      {"scale", [](const DeviceContext& c, Tensor f, Tensor r) { ops::scale(c, f, r, 2.0f); }},
      {"fill", [](const DeviceContext& c, Tensor f, Tensor) { ops::fill(c, f, 1.0f); }, true},
      {"cast", [](const DeviceContext& c, Tensor f, Tensor r) { ops::cast(c, f, r); }},
      {"gelu_forward",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::gelu_forward(c, f, r); }},
      {"gelu_backward",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::gelu_backward(c, f, r, r); }},
      {"bias_gelu_forward",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::bias_gelu_forward(c, f, r, r); }},
      {"bias_gelu_backward", [](const DeviceContext& c, Tensor f,
                                Tensor r) { ops::bias_gelu_backward(c, f, r, r, r, r); }},
      {"layernorm_forward", [](const DeviceContext& c, Tensor f,
                               Tensor r) { ops::layernorm_forward(c, f, r, r, r, r, r, 1e-5f); }},
      {"layernorm_backward", [](const DeviceContext& c, Tensor f,
                                Tensor r) { ops::layernorm_backward(c, f, r, r, r, r, r, r, r); }},
      {"linear_forward",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::linear_forward(c, f, r, r, r); }},
      {"linear_backward", [](const DeviceContext& c, Tensor f,
                             Tensor r) { ops::linear_backward(c, f, r, r, r, r, r); }},
      {"batched_matmul", [](const DeviceContext& c, Tensor f,
                            Tensor r) { ops::batched_matmul(c, f, r, r, false, false); }},
      {"dropout_forward",
       [drop](const DeviceContext& c, Tensor f, Tensor r) { ops::dropout_forward(c, f, r, drop); }},
      {"dropout_backward", [drop](const DeviceContext& c, Tensor f,
                                  Tensor r) { ops::dropout_backward(c, f, r, drop); }},
      {"bias_dropout_add_forward",
       [drop](const DeviceContext& c, Tensor f, Tensor r) {
         ops::bias_dropout_add_forward(c, f, r, r, r, drop);
       }},
      {"bias_dropout_add_backward",
       [drop](const DeviceContext& c, Tensor f, Tensor r) {
         ops::bias_dropout_add_backward(c, f, r, r, r, drop);
       }},
      {"embedding_lookup",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::embedding_lookup(c, f, r, r); }},
      {"embedding_lookup_add",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::embedding_lookup_add(c, f, r, r); }},
      {"embedding_backward",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::embedding_backward(c, f, r, r); }},
      {"cross_entropy_row_max",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::cross_entropy_row_max(c, f, r); }},
      {"cross_entropy_target_logit",
       [](const DeviceContext& c, Tensor f, Tensor r) {
         ops::cross_entropy_target_logit(c, f, r, r, r);
       }},
      {"cross_entropy_exp_sum",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::cross_entropy_exp_sum(c, f, r, r); }},
      {"cross_entropy_loss",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::cross_entropy_loss(c, f, r, r); }},
      {"cross_entropy_forward", [](const DeviceContext& c, Tensor f,
                                   Tensor r) { ops::cross_entropy_forward(c, f, r, r, r, r); }},
      {"cross_entropy_backward",
       [](const DeviceContext& c, Tensor f, Tensor r) {
         ops::cross_entropy_backward(c, f, r, r, r, r, r);
       }},
      {"masked_mean_loss",
       [](const DeviceContext& c, Tensor f, Tensor r) { ops::masked_mean_loss(c, f, r); }},
      {"masked_mean_loss_backward",
       [](const DeviceContext& c, Tensor f, Tensor r) {
         ops::masked_mean_loss_backward(c, f, r, 1.0f);
       }},
      {"loss_mask_sum", [](const DeviceContext& c, Tensor f, Tensor) { ops::loss_mask_sum(c, f); },
       true},
      {"flash_attention_forward", [](const DeviceContext& c, Tensor f,
                                     Tensor r) { ops::flash_attention_forward(c, f, r, r, 1.0f); }},
      {"flash_attention_backward",
       [](const DeviceContext& c, Tensor f, Tensor r) {
         ops::flash_attention_backward(c, f, r, r, r, r, 1.0f);
       }},
      {"adamw_step", [adam](const DeviceContext& c, Tensor f,
                            Tensor r) { ops::adamw_step(c, f, r, r, r, adam, 1); }},
      {"sum_of_squares",
       [](const DeviceContext& c, Tensor f, Tensor) { ops::sum_of_squares(c, f); }, true},
      {"adamw_step_and_cast",
       [adam](const DeviceContext& c, Tensor f, Tensor r) {
         ops::adamw_step_and_cast(c, f, r, r, r, adam, 1, r);
       }},
      {"accumulate_rounded",
       [](const DeviceContext& c, Tensor f, Tensor r) {
         ops::accumulate_rounded(c, f, r, tensor::DType::kBFloat16);
       }},
      {"round_through",
       [](const DeviceContext& c, Tensor f, Tensor) {
         ops::round_through(c, f, tensor::DType::kBFloat16);
       },
       true},
      {"scale_in_dtype",
       [](const DeviceContext& c, Tensor f, Tensor) { ops::scale_in_dtype(c, f, 0.5f); }, true},
      {"divide_in_dtype",
       [](const DeviceContext& c, Tensor f, Tensor) { ops::divide_in_dtype(c, f, 2.0f); }, true},
      {"has_inf_or_nan",
       [](const DeviceContext& c, Tensor f, Tensor) { ops::has_inf_or_nan(c, f); }, true},
      {"sums_of_squares",
       [](const DeviceContext& c, Tensor f, Tensor) {
         const ops::SquaresSegment all{0, f.numel()};
         ops::sums_of_squares(c, f, {&all, 1});
       },
       true},
  };
}

struct Tensors {
  std::vector<float> a = std::vector<float>(8, 1.0f), b = std::vector<float>(8, 1.0f);
  Tensor host() { return {a.data(), tensor::DType::kFloat32, {2, 4}}; }
  Tensor cuda() { return {b.data(), tensor::DType::kFloat32, {2, 4}, kCuda0}; }
};

TEST(OpsDispatch, MixedDevicesFailWithOneLineNamingTheOp) {
  for (const OpCase& op : every_op()) {
    if (op.one_tensor) continue;
    SCOPED_TRACE(op.name);
    Tensors t;
    const std::string message =
        testing_support::one_line_error([&] { op.call(DeviceContext{}, t.cuda(), t.host()); });
    EXPECT_NE(message.find(std::string("ops::") + op.name + ":"), std::string::npos) << message;
    EXPECT_NE(message.find("are on different devices (cpu and cuda:0)"), std::string::npos)
        << message;
  }
}

TEST(OpsDispatch, DeviceTensorsWithAHostContextFail) {
  for (const OpCase& op : every_op()) {
    SCOPED_TRACE(op.name);
    Tensors t;
    const std::string message =
        testing_support::one_line_error([&] { op.call(DeviceContext{}, t.cuda(), t.cuda()); });
    EXPECT_NE(message.find(std::string("ops::") + op.name + ":"), std::string::npos) << message;
    EXPECT_NE(message.find("the tensors are on cuda:0 but the DeviceContext runs on cpu"),
              std::string::npos)
        << message;
  }
}

TEST(OpsDispatch, OverloadsWithoutAContextAreForHostTensors) {
  Tensors t;
  const Tensor cuda = t.cuda();
  EXPECT_NE(testing_support::one_line_error([&] {
              ops::add(cuda, cuda, cuda);
            }).find("DeviceContext runs on cpu"),
            std::string::npos);
  EXPECT_NE(testing_support::one_line_error([&] {
              ops::fill(cuda, 0.0f);
            }).find("DeviceContext runs on cpu"),
            std::string::npos);
  EXPECT_NE(testing_support::one_line_error([&] {
              ops::sum_of_squares(cuda);
            }).find("DeviceContext runs on cpu"),
            std::string::npos);
  // And the host results are those of a host context.
  std::vector<float> x = {1, 2, 3}, y(3), z(3);
  const Tensor xt(x.data(), tensor::DType::kFloat32, {3});
  ops::scale(Tensor(y.data(), tensor::DType::kFloat32, {3}), xt, 2.0f);
  ops::scale(DeviceContext{}, Tensor(z.data(), tensor::DType::kFloat32, {3}), xt, 2.0f);
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(y, z);
}

TEST(OpsDispatch, HostOnlyAndDeviceOnlyAttention) {
  Tensors t;
  // The probabilities path has no CUDA twin; the flash kernels have no host twin.
  const Tensor cuda = t.cuda();
  EXPECT_EQ(
      testing_support::one_line_error([&] { ops::attention_probs_forward(cuda, cuda, 1.0f); }),
      "ops::attention_probs_forward runs on host tensors only (it has no CUDA backend)");
  std::vector<float> qkv(3 * 2 * 3 * 8), ctx(3 * 2 * 8), lse(2 * 3);
  const std::string message = testing_support::one_line_error([&] {
    ops::flash_attention_forward(DeviceContext{},
                                 Tensor(ctx.data(), tensor::DType::kFloat32, {3, 2, 8}),
                                 Tensor(lse.data(), tensor::DType::kFloat32, {2, 1, 3}),
                                 Tensor(qkv.data(), tensor::DType::kFloat32, {3, 2, 24}), 1.0f);
  });
  EXPECT_NE(message.find("ops::flash_attention_forward runs on CUDA tensors only"),
            std::string::npos)
      << message;
}

TEST(OpsDispatch, FlashAttentionSupportFollowsTheBuild) {
  for (const std::int64_t hn : {8, 16, 32, 64, 96, 128}) {
    EXPECT_EQ(ops::flash_attention_supports(hn), tensor::kCudaBuilt) << hn;
  }
  EXPECT_FALSE(ops::flash_attention_supports(48));
  EXPECT_FALSE(ops::flash_attention_supports(256));
}

// The keep bits' layout (ops/attention.h): a word per 32 keys, rows rounded to 64 keys; the
// kernels count the same words in CUDA builds. Only the tensor-core kernels read them.
TEST(OpsDispatch, FlashAttentionKeepBitsLayoutAndUse) {
  EXPECT_EQ(ops::flash_attention_keep_bits_shape(2, 3, 100), (tensor::Shape{2, 3, 100, 4}));
  EXPECT_EQ(ops::flash_attention_keep_bits_shape(1, 12, 1024), (tensor::Shape{1, 12, 1024, 32}));
  EXPECT_EQ(ops::flash_attention_keep_bits_shape(1, 1, 1), (tensor::Shape{1, 1, 1, 2}));
#if defined(MDS_WITH_CUDA)
  for (const std::int64_t s : {1, 63, 64, 65, 128, 1000, 2048}) {
    EXPECT_EQ(ops::flash_attention_keep_bits_shape(1, 1, s)[3], kernels::attention_keep_words(s))
        << s;
  }
#endif
  EXPECT_EQ(ops::flash_attention_reads_keep_bits(tensor::DType::kBFloat16, 64), tensor::kCudaBuilt);
  EXPECT_EQ(ops::flash_attention_reads_keep_bits(tensor::DType::kFloat16, 128), tensor::kCudaBuilt);
  EXPECT_FALSE(ops::flash_attention_reads_keep_bits(tensor::DType::kFloat32, 64));
  EXPECT_FALSE(ops::flash_attention_reads_keep_bits(tensor::DType::kBFloat16, 96));
}

}  // namespace
}  // namespace mds
