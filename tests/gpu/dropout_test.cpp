#include "kernels/dropout.h"

#include <gtest/gtest.h>

#include "ops/cpu/dropout.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_floats;
using ops::DropoutStream;

const DropoutStream kStreams[] = {
    {0.1f, 1234, 0}, {0.5f, 0xDEADBEEFCAFEull, 77ull << 40}, {0.0f, 5, 9}};

TEST(GpuDropout, MaskIsBitIdenticalToCpu) {
  for (const DropoutStream& stream : kStreams) {
    for (const std::int64_t n : gpu_test::flat_sizes()) {
      SCOPED_TRACE(testing::Message() << "p=" << stream.p << " n=" << n);
      const auto un = static_cast<std::size_t>(n);
      // x = 1: out is the factor, scale or 0, so it spells the mask.
      DeviceArray<float> ones(std::vector<float>(un, 1.0f)), out(un);
      kernels::dropout_forward(out.get(), ones.get(), nullptr, nullptr, n, n, stream, nullptr);
      const auto got = out.download();
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < un; ++i)
        mismatches += (got[i] != 0.0f) != ops::dropout_keep(stream, i) ? 1 : 0;
      EXPECT_EQ(mismatches, 0u);
    }
  }
}

TEST(GpuDropout, ForwardBackwardAndBiasGradMatchCpu) {
  for (const DropoutStream& stream : kStreams) {
    for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
      SCOPED_TRACE(testing::Message() << "p=" << stream.p << " " << rows << "x" << cols);
      const std::int64_t n = rows * cols;
      const auto un = static_cast<std::size_t>(n), uc = static_cast<std::size_t>(cols);
      const auto x = random_floats(un, 50), bias = random_floats(uc, 51);
      const auto residual = random_floats(un, 52), dout = random_floats(un, 53);
      std::vector<float> ref_plain(un), ref_bda(un);
      ops::cpu::dropout_forward(ref_plain.data(), x.data(), nullptr, nullptr, n, cols, stream);
      ops::cpu::dropout_forward(ref_bda.data(), x.data(), bias.data(), residual.data(), n, cols,
                                stream);
      std::vector<float> ref_dx(un), ref_acc = random_floats(un, 54);
      auto ref_dbias = random_floats(uc, 55);
      DeviceArray<float> dacc(ref_acc), ddbias(ref_dbias);
      ops::cpu::dropout_backward(ref_dx.data(), dout.data(), n, stream, false);
      ops::cpu::dropout_backward(ref_acc.data(), dout.data(), n, stream, true);
      ops::cpu::dropout_bias_grad(ref_dbias.data(), dout.data(), rows, cols, stream);

      DeviceArray<float> dx(x), dbias(bias), dres(residual), ddout(dout);
      DeviceArray<float> plain(un), bda(un), ddx(un);
      kernels::dropout_forward(plain.get(), dx.get(), nullptr, nullptr, n, cols, stream, nullptr);
      kernels::dropout_forward(bda.get(), dx.get(), dbias.get(), dres.get(), n, cols, stream,
                               nullptr);
      kernels::dropout_backward(ddx.get(), ddout.get(), n, stream, false, nullptr);
      kernels::dropout_backward(dacc.get(), ddout.get(), n, stream, true, nullptr);
      kernels::ColumnSumScratch scratch;
      kernels::dropout_bias_grad(ddbias.get(), ddout.get(), rows, cols, stream, scratch, nullptr);
      // Elementwise results: the same operations on the same mask, bit for bit.
      EXPECT_EQ(plain.download(), ref_plain);
      EXPECT_EQ(bda.download(), ref_bda);
      EXPECT_EQ(ddx.download(), ref_dx);
      EXPECT_EQ(dacc.download(), ref_acc);
      // A column sum in another order.
      MDS_EXPECT_CLOSE(ddbias.download(), ref_dbias, 1e-5);
    }
  }
}

}  // namespace
}  // namespace mds
