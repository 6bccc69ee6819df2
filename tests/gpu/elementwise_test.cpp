#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "ops/cpu/elementwise.h"
#include "tests/gpu/gpu_test_util.h"

namespace mds {
namespace {

using gpu_test::DeviceArray;
using gpu_test::flat_sizes;
using gpu_test::random_floats;
using tensor::DType;

TEST(GpuElementwise, AddAndScaleMatchCpu) {
  for (const std::int64_t n : flat_sizes()) {
    SCOPED_TRACE(n);
    const auto un = static_cast<std::size_t>(n);
    const auto a = random_floats(un, 1), b = random_floats(un, 2);
    std::vector<float> sum(un), scaled(un);
    ops::cpu::add(sum.data(), a.data(), b.data(), n);
    ops::cpu::scale(scaled.data(), a.data(), 0.37f, n);
    DeviceArray<float> da(a), db(b), dsum(un), dscaled(un);
    kernels::add(dsum.get(), da.get(), db.get(), n, nullptr);
    kernels::scale(dscaled.get(), da.get(), 0.37f, n, nullptr);
    // Single IEEE operations: bit-identical.
    EXPECT_EQ(dsum.download(), sum);
    EXPECT_EQ(dscaled.download(), scaled);
  }
}

// +0 takes cudaMemsetAsync, other values (-0 too) the fill kernels; outputs start all ones.
TEST(GpuElementwise, FillEveryDtype) {
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (const std::int64_t n : {std::int64_t{1}, std::int64_t{257}, std::int64_t{65537}}) {
      for (const float value : {1.2345f, 0.0f, -0.0f}) {
        const auto un = static_cast<std::size_t>(n);
        const std::size_t bytes = un * tensor::dtype_size(dtype);
        std::vector<std::uint8_t> cpu(bytes);
        ops::cpu::fill(cpu.data(), dtype, value, n);
        DeviceArray<std::uint8_t> out(std::vector<std::uint8_t>(bytes, 0xFF));
        kernels::fill(out.get(), dtype, value, n, nullptr);
        EXPECT_EQ(out.download(), cpu)
            << tensor::dtype_name(dtype) << " n=" << n << " value " << value;
      }
    }
  }
}

TEST(GpuElementwise, CastsAreBitIdenticalToCpu) {
  const DType dtypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};
  for (const std::int64_t n : flat_sizes()) {
    const auto un = static_cast<std::size_t>(n);
    // Values across fp16's normal and subnormal range, ties included, plus overflow to inf.
    auto values = random_floats(un, 3, -70000.0f, 70000.0f);
    const auto small = random_floats(un, 4, -1e-6f, 1e-6f);
    for (std::size_t i = 0; i < un; i += 2) values[i] = small[i];
    for (const DType from : dtypes) {
      for (const DType to : dtypes) {
        SCOPED_TRACE(testing::Message()
                     << tensor::dtype_name(from) << "->" << tensor::dtype_name(to) << " n=" << n);
        std::vector<std::uint8_t> source(un * tensor::dtype_size(from));
        ops::cpu::cast(source.data(), from, values.data(), DType::kFloat32, n);
        std::vector<std::uint8_t> cpu(un * tensor::dtype_size(to));
        ops::cpu::cast(cpu.data(), to, source.data(), from, n);
        DeviceArray<std::uint8_t> dsource(source), dout(cpu.size());
        kernels::cast(dout.get(), to, dsource.get(), from, n, nullptr);
        EXPECT_EQ(dout.download(), cpu);
      }
    }
  }
}

// One launch for many pieces (ZeRO's per-parameter gathers): every dtype pair, plain and times a
// factor, the bits of one CPU cast per piece, the elements between pieces untouched (the output
// starts all ones).
TEST(GpuElementwise, CastPiecesAreOneCpuCastAPiece) {
  const DType dtypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};
  std::vector<ops::CastPiece> pieces;
  std::int64_t contiguous = 0, scattered = 7;
  for (const std::int64_t numel : {768, 1, 0, 2304, 255, 257, 3, 65537, 17}) {
    pieces.push_back({scattered, contiguous, numel});  // a scatter; the gather is its reverse
    contiguous += numel;
    scattered += numel + 5;
  }
  const auto in_numel = static_cast<std::size_t>(contiguous);
  const auto out_numel = static_cast<std::size_t>(scattered);
  const auto values = random_floats(in_numel, 5, -70000.0f, 70000.0f);
  for (const DType from : dtypes) {
    for (const DType to : dtypes) {
      SCOPED_TRACE(testing::Message()
                   << tensor::dtype_name(from) << "->" << tensor::dtype_name(to));
      std::vector<std::uint8_t> source(in_numel * tensor::dtype_size(from));
      ops::cpu::cast(source.data(), from, values.data(), DType::kFloat32, contiguous);
      const std::size_t out_size = tensor::dtype_size(to), in_size = tensor::dtype_size(from);
      for (const float factor : {1.0f, 0.37f}) {
        std::vector<std::uint8_t> cpu(out_numel * out_size, 0xFF);
        for (const ops::CastPiece& piece : pieces) {
          std::vector<float> wide(static_cast<std::size_t>(piece.numel));
          ops::cpu::cast(wide.data(), DType::kFloat32,
                         source.data() + piece.in * static_cast<std::int64_t>(in_size), from,
                         piece.numel);
          if (factor != 1.0f) ops::cpu::scale(wide.data(), wide.data(), factor, piece.numel);
          ops::cpu::cast(cpu.data() + piece.out * static_cast<std::int64_t>(out_size), to,
                         wide.data(), DType::kFloat32, piece.numel);
        }
        DeviceArray<std::uint8_t> dsource(source),
            dout(std::vector<std::uint8_t>(cpu.size(), 0xFF));
        kernels::cast_pieces(dout.get(), to, dsource.get(), from, pieces, factor, nullptr);
        EXPECT_EQ(dout.download(), cpu) << "factor " << factor;
      }
    }
  }
}

TEST(GpuElementwise, RejectsNonFloatDtypes) {
  DeviceArray<std::int64_t> out(4);
  EXPECT_THROW(kernels::fill(out.get(), DType::kInt64, 1.0f, 4, nullptr), base::Error);
}

}  // namespace
}  // namespace mds
