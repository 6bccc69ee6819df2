#include "kernels/gelu.h"

#include <gtest/gtest.h>

#include "ops/cpu/gelu.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_floats;
using ops::GeluKind;

// tanhf/erff against the CPU's vector_tanh/erf: a few ulp per element.
constexpr double kBound = 2e-6;
constexpr GeluKind kKinds[] = {GeluKind::kTanhFused, GeluKind::kTanhOpenAI, GeluKind::kErf};

TEST(GpuGelu, BiasForwardMatchesCpu) {
  for (const GeluKind kind : kKinds) {
    for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
      SCOPED_TRACE(testing::Message() << static_cast<int>(kind) << " " << rows << "x" << cols);
      const auto n = static_cast<std::size_t>(rows * cols);
      const auto x = random_floats(n, 5), bias = random_floats(static_cast<std::size_t>(cols), 6);
      std::vector<float> ref(n), ref_plain(n);
      ops::cpu::bias_gelu_forward(ref.data(), x.data(), bias.data(), rows, cols, kind);
      ops::cpu::gelu_forward(ref_plain.data(), x.data(), rows * cols, kind);
      DeviceArray<float> dx(x), dbias(bias), out(n), out_plain(n);
      kernels::bias_gelu_forward(out.get(), dx.get(), dbias.get(), rows, cols, kind, nullptr);
      kernels::gelu_forward(out_plain.get(), dx.get(), rows * cols, kind, nullptr);
      MDS_EXPECT_CLOSE(out.download(), ref, kBound);
      MDS_EXPECT_CLOSE(out_plain.download(), ref_plain, kBound);
    }
  }
}

TEST(GpuGelu, BiasBackwardMatchesCpu) {
  for (const GeluKind kind : kKinds) {
    for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
      SCOPED_TRACE(testing::Message() << static_cast<int>(kind) << " " << rows << "x" << cols);
      const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
      const auto x = random_floats(n, 7), bias = random_floats(uc, 8), dout = random_floats(n, 9);
      // Backwards accumulate: start from non-zero gradients on both sides.
      auto ref_dx = random_floats(n, 10), ref_dbias = random_floats(uc, 11);
      auto ref_dx_plain = ref_dx;
      DeviceArray<float> dx(ref_dx), dbias(ref_dbias), dx_nobias(ref_dx), dx_plain(ref_dx);
      DeviceArray<float> dx_in(x), dbias_in(bias), ddout(dout);
      std::vector<float> ref_dx_nobias = ref_dx;
      ops::cpu::bias_gelu_backward(ref_dx.data(), ref_dbias.data(), dout.data(), x.data(),
                                   bias.data(), rows, cols, kind);
      ops::cpu::bias_gelu_backward(ref_dx_nobias.data(), nullptr, dout.data(), x.data(),
                                   bias.data(), rows, cols, kind);
      ops::cpu::gelu_backward(ref_dx_plain.data(), dout.data(), x.data(), rows * cols, kind);
      kernels::ColumnSumScratch scratch;
      kernels::bias_gelu_backward(dx.get(), dbias.get(), ddout.get(), dx_in.get(), dbias_in.get(),
                                  rows, cols, kind, scratch, nullptr);
      kernels::bias_gelu_backward(dx_nobias.get(), nullptr, ddout.get(), dx_in.get(),
                                  dbias_in.get(), rows, cols, kind, scratch, nullptr);
      kernels::gelu_backward(dx_plain.get(), ddout.get(), dx_in.get(), rows * cols, kind, nullptr);
      MDS_EXPECT_CLOSE(dx.download(), ref_dx, kBound);
      MDS_EXPECT_CLOSE(dbias.download(), ref_dbias, 1e-5);
      MDS_EXPECT_CLOSE(dx_nobias.download(), ref_dx_nobias, kBound);
      MDS_EXPECT_CLOSE(dx_plain.download(), ref_dx_plain, kBound);
    }
  }
}

// No bias, x holding it already (--cublaslt-epilogues' pre-activation): dx and the column sums
// against the host's (the 16-bit case runs in Model16BitOnDevice.GemmEpiloguesFollowTheHost).
TEST(GpuGelu, BiasBackwardWithoutBiasMatchesCpu) {
  for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
    const auto x = random_floats(n, 12), dout = random_floats(n, 13);
    auto ref_dx = random_floats(n, 14), ref_dbias = random_floats(uc, 15);
    DeviceArray<float> dx(ref_dx), dbias(ref_dbias), dx_in(x), ddout(dout);
    ops::cpu::bias_gelu_backward(ref_dx.data(), ref_dbias.data(), dout.data(), x.data(), nullptr,
                                 rows, cols, GeluKind::kTanhFused);
    kernels::ColumnSumScratch scratch;
    kernels::bias_gelu_backward(dx.get(), dbias.get(), ddout.get(), dx_in.get(), nullptr, rows,
                                cols, GeluKind::kTanhFused, scratch, nullptr);
    MDS_EXPECT_CLOSE(dx.download(), ref_dx, kBound);
    MDS_EXPECT_CLOSE(dbias.download(), ref_dbias, 1e-5);
  }
}

TEST(GpuGelu, BiasBackwardIsDeterministic) {
  const std::int64_t rows = 300, cols = 77;
  const auto n = static_cast<std::size_t>(rows * cols);
  const auto x = random_floats(n, 12), bias = random_floats(cols, 13), dout = random_floats(n, 14);
  DeviceArray<float> dx_in(x), dbias_in(bias), ddout(dout);
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    DeviceArray<float> dx(std::vector<float>(n, 0.0f)), dbias(std::vector<float>(cols, 0.0f));
    kernels::ColumnSumScratch scratch;
    kernels::bias_gelu_backward(dx.get(), dbias.get(), ddout.get(), dx_in.get(), dbias_in.get(),
                                rows, cols, GeluKind::kTanhFused, scratch, nullptr);
    const auto got = dbias.download();
    if (run == 0) first = got;
    EXPECT_EQ(got, first);
  }
}

}  // namespace
}  // namespace mds
