#include "kernels/layernorm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "ops/cpu/elementwise.h"
#include "ops/cpu/layernorm.h"
#include "tensor/dtype.h"
#include "tensor/round_to.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::random_floats;

TEST(GpuLayerNorm, ForwardMatchesCpu) {
  for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
    const auto ur = static_cast<std::size_t>(rows);
    // An offset mean, as activations have, so the two-pass variance matters.
    const auto x = random_floats(n, 20, 1.0f, 4.0f);
    const auto weight = random_floats(uc, 21), bias = random_floats(uc, 22);
    std::vector<float> ref(n), ref_mean(ur), ref_rstd(ur);
    ops::cpu::layernorm_forward(ref.data(), ref_mean.data(), ref_rstd.data(), x.data(),
                                weight.data(), bias.data(), rows, cols, 1e-5f);
    DeviceArray<float> dx(x), dw(weight), db(bias), out(n), mean(ur), rstd(ur);
    kernels::layernorm_forward(out.get(), mean.get(), rstd.get(), dx.get(), dw.get(), db.get(),
                               rows, cols, 1e-5f, nullptr);
    MDS_EXPECT_CLOSE(out.download(), ref, 1e-5);
    MDS_EXPECT_CLOSE(mean.download(), ref_mean, 1e-6);
    MDS_EXPECT_CLOSE(rstd.download(), ref_rstd, 1e-5);
  }
}

TEST(GpuLayerNorm, BackwardMatchesCpu) {
  for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
    const auto ur = static_cast<std::size_t>(rows);
    const auto x = random_floats(n, 23, -2.0f, 5.0f), dout = random_floats(n, 24);
    const auto weight = random_floats(uc, 25), bias = random_floats(uc, 26);
    std::vector<float> y(n), mean(ur), rstd(ur);
    ops::cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), weight.data(),
                                bias.data(), rows, cols, 1e-5f);
    // Gradients accumulate: start from random values.
    auto ref_dx = random_floats(n, 27), ref_dw = random_floats(uc, 28);
    auto ref_db = random_floats(uc, 29);
    DeviceArray<float> ddx(ref_dx), ddw(ref_dw), ddb(ref_db), ddx_only(ref_dx);
    auto ref_dx_only = ref_dx;
    ops::cpu::layernorm_backward(ref_dx.data(), ref_dw.data(), ref_db.data(), dout.data(), x.data(),
                                 weight.data(), mean.data(), rstd.data(), rows, cols);
    ops::cpu::layernorm_backward(ref_dx_only.data(), nullptr, nullptr, dout.data(), x.data(),
                                 weight.data(), mean.data(), rstd.data(), rows, cols);
    DeviceArray<float> dx_in(x), ddout(dout), dweight(weight), dmean(mean), drstd(rstd);
    kernels::ColumnSumScratch scratch;
    kernels::layernorm_backward(ddx.get(), ddw.get(), ddb.get(), ddout.get(), dx_in.get(),
                                dweight.get(), dmean.get(), drstd.get(), rows, cols, scratch,
                                nullptr);
    kernels::layernorm_backward(ddx_only.get(), nullptr, nullptr, ddout.get(), dx_in.get(),
                                dweight.get(), dmean.get(), drstd.get(), rows, cols, scratch,
                                nullptr);
    MDS_EXPECT_CLOSE(ddx.download(), ref_dx, 1e-5);
    MDS_EXPECT_CLOSE(ddw.download(), ref_dw, 1e-5);
    MDS_EXPECT_CLOSE(ddb.download(), ref_db, 1e-5);
    MDS_EXPECT_CLOSE(ddx_only.download(), ref_dx_only, 1e-5);
  }
}

TEST(GpuLayerNorm, ResidualForwardMatchesCpuAddThenLayerNorm) {
  for (const auto [rows, cols] : gpu_test::matrix_sizes()) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
    const auto ur = static_cast<std::size_t>(rows);
    const auto x = random_floats(n, 30, -1.0f, 1.0f), residual = random_floats(n, 31, 1.0f, 4.0f);
    const auto weight = random_floats(uc, 32), bias = random_floats(uc, 33);
    std::vector<float> ref_sum(n), ref(n), ref_mean(ur), ref_rstd(ur);
    ops::cpu::add(ref_sum.data(), x.data(), residual.data(), rows * cols);
    ops::cpu::layernorm_forward(ref.data(), ref_mean.data(), ref_rstd.data(), ref_sum.data(),
                                weight.data(), bias.data(), rows, cols, 1e-5f);
    DeviceArray<float> dx(x), dres(residual), dw(weight), db(bias), sum(n), out(n), mean(ur),
        rstd(ur);
    kernels::residual_layernorm_forward(sum.get(), out.get(), mean.get(), rstd.get(), dx.get(),
                                        dres.get(), dw.get(), db.get(), rows, cols, 1e-5f, nullptr);
    EXPECT_EQ(sum.download(), ref_sum);  // one addition per element
    MDS_EXPECT_CLOSE(out.download(), ref, 1e-5);
    MDS_EXPECT_CLOSE(mean.download(), ref_mean, 1e-6);
    MDS_EXPECT_CLOSE(rstd.download(), ref_rstd, 1e-5);
    // In place on the residual stream: the same results.
    DeviceArray<float> out2(n), mean2(ur), rstd2(ur);
    kernels::residual_layernorm_forward(dres.get(), out2.get(), mean2.get(), rstd2.get(), dx.get(),
                                        dres.get(), dw.get(), db.get(), rows, cols, 1e-5f, nullptr);
    EXPECT_EQ(dres.download(), ref_sum);
    EXPECT_EQ(out2.download(), out.download());
  }
}

// Both kernel families (kernels/layernorm.h): the warp kernels where rows allow (kAuto) and the
// block kernels forced, on GPT-2's hidden sizes and partial blocks of rows; each within the CPU
// bounds above.
TEST(GpuLayerNorm, WarpAndBlockKernelsBothMatchCpu) {
  using kernels::LayerNormKernel;
  constexpr auto kF32 = tensor::DType::kFloat32;
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{33, 768},
                                   {9, 1024},
                                   {5, 1600},
                                   {17, 2048},
                                   {3, 264}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
    const auto ur = static_cast<std::size_t>(rows);
    const auto x = random_floats(n, 40, 1.0f, 4.0f), dout = random_floats(n, 41);
    const auto weight = random_floats(uc, 42), bias = random_floats(uc, 43);
    const auto dx0 = random_floats(n, 44);
    std::vector<float> ref(n), ref_mean(ur), ref_rstd(ur), ref_dx = dx0;
    ops::cpu::layernorm_forward(ref.data(), ref_mean.data(), ref_rstd.data(), x.data(),
                                weight.data(), bias.data(), rows, cols, 1e-5f);
    ops::cpu::layernorm_backward(ref_dx.data(), nullptr, nullptr, dout.data(), x.data(),
                                 weight.data(), ref_mean.data(), ref_rstd.data(), rows, cols);
    for (const LayerNormKernel family : {LayerNormKernel::kAuto, LayerNormKernel::kBlock}) {
      SCOPED_TRACE(family == LayerNormKernel::kAuto ? "auto (warp)" : "block");
      DeviceArray<float> dx(x), dw(weight), db(bias), out(n), mean(ur), rstd(ur);
      DeviceArray<float> ddout(dout), dgrad(dx0), ref_dmean(ref_mean), ref_drstd(ref_rstd);
      kernels::layernorm_forward(out.get(), mean.get(), rstd.get(), dx.get(), dw.get(), db.get(),
                                 kF32, kF32, rows, cols, 1e-5f, nullptr, family);
      MDS_EXPECT_CLOSE(out.download(), ref, 1e-5);
      MDS_EXPECT_CLOSE(mean.download(), ref_mean, 1e-6);
      MDS_EXPECT_CLOSE(rstd.download(), ref_rstd, 1e-5);
      kernels::ColumnSumScratch scratch;
      kernels::layernorm_backward(dgrad.get(), nullptr, nullptr, ddout.get(), dx.get(), dw.get(),
                                  ref_dmean.get(), ref_drstd.get(), kF32, kF32, rows, cols, scratch,
                                  nullptr, family);
      MDS_EXPECT_CLOSE(dgrad.download(), ref_dx, 1e-5);
    }
  }
}

// The backward with dweight and dbias: kAuto sums them in the dx pass where rows take 1 to 4
// chunks a lane (768, 1024, 264 here; not 1600 or 2048), kSeparateParams with the column-sum
// kernel. dx bit for bit the same (the same expressions), dweight and dbias (added onto starting
// values) within 1e-5 of the host's for both, in bf16 too; over NaN-free outputs only.
TEST(GpuLayerNorm, FusedParameterSumsMatchTheSeparateKernel) {
  using kernels::LayerNormKernel;
  for (const tensor::DType dtype : {tensor::DType::kFloat32, tensor::DType::kBFloat16}) {
    for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{8192, 768},
                                     {33, 768},
                                     {9, 1024},
                                     {5, 1600},
                                     {70, 264}}) {
      SCOPED_TRACE(testing::Message() << tensor::dtype_name(dtype) << " " << rows << "x" << cols);
      const auto n = static_cast<std::size_t>(rows * cols), uc = static_cast<std::size_t>(cols);
      const auto ur = static_cast<std::size_t>(rows);
      const bool bf16 = dtype == tensor::DType::kBFloat16;
      const auto stored = [&](std::vector<float> v) {  // the values the device holds, widened
        if (bf16) {
          for (float& f : v) f = tensor::to_float(tensor::round_to<tensor::BFloat16>(f));
        }
        return v;
      };
      const auto x = stored(random_floats(n, 50, 1.0f, 4.0f)), dout = stored(random_floats(n, 51));
      const auto dx0 = stored(random_floats(n, 52));
      const auto weight = random_floats(uc, 53), bias = random_floats(uc, 54);
      const auto dweight0 = random_floats(uc, 55), dbias0 = random_floats(uc, 56);
      std::vector<float> out(n), mean(ur), rstd(ur), want_dx = dx0, want_dw = dweight0,
                                                     want_db = dbias0;
      ops::cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), weight.data(),
                                  bias.data(), rows, cols, 1e-5f);
      ops::cpu::layernorm_backward(want_dx.data(), want_dw.data(), want_db.data(), dout.data(),
                                   x.data(), weight.data(), mean.data(), rstd.data(), rows, cols);
      const auto to_device = [&](const std::vector<float>& v) {
        if (!bf16) return DeviceArray<std::uint16_t>(0);
        std::vector<std::uint16_t> b;
        for (const float f : v) b.push_back(tensor::round_to<tensor::BFloat16>(f).bits);
        return DeviceArray<std::uint16_t>(b);
      };
      std::vector<std::vector<float>> dx_of, dw_of, db_of;
      for (const LayerNormKernel family :
           {LayerNormKernel::kAuto, LayerNormKernel::kSeparateParams}) {
        DeviceArray<float> x32(x), dout32(dout), dx32(dx0), w(weight), dmean(mean), drstd(rstd);
        DeviceArray<float> dw(dweight0), db(dbias0);
        DeviceArray<std::uint16_t> x16 = to_device(x), dout16 = to_device(dout),
                                   dx16 = to_device(dx0);
        kernels::ColumnSumScratch scratch;
        kernels::layernorm_backward(
            bf16 ? static_cast<void*>(dx16.get()) : dx32.get(), dw.get(), db.get(),
            bf16 ? static_cast<const void*>(dout16.get()) : dout32.get(),
            bf16 ? static_cast<const void*>(x16.get()) : x32.get(), w.get(), dmean.get(),
            drstd.get(), dtype, tensor::DType::kFloat32, rows, cols, scratch, nullptr, family);
        std::vector<float> got_dx;
        if (bf16) {
          for (const std::uint16_t b : dx16.download())
            got_dx.push_back(tensor::to_float(tensor::BFloat16{b}));
        } else {
          got_dx = dx32.download();
        }
        dx_of.push_back(got_dx);
        dw_of.push_back(dw.download());
        db_of.push_back(db.download());
        MDS_EXPECT_CLOSE(dw_of.back(), want_dw, 1e-5);
        MDS_EXPECT_CLOSE(db_of.back(), want_db, 1e-5);
        MDS_EXPECT_CLOSE(got_dx, want_dx, bf16 ? 1e-2 : 1e-5);
      }
      EXPECT_EQ(dx_of[0], dx_of[1]);
    }
  }
}

}  // namespace
}  // namespace mds
