// The linear layer's bias gradient (kernels/bias_grad_kernels.cuh) run on the CPU under the SIMT
// emulation with the launches kernels/gemm.cu uses: the eight-columns-a-thread kernel gives the
// one-column kernel's bits (each column summed in the same order), both within 1e-5 of the sums
// in double, onto a nonzero dbias, for fp32 and the 16-bit storages; rows over several chunks,
// partial column tiles, and shapes only the one-column kernel takes.
#include "tests/unit/emulated_device_common.h"

#include "kernels/bias_grad_kernels.cuh"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/emulated_column_sums.h"
#include "tests/unit/emulated_compare.h"
#include "tests/unit/guarded_buffer.h"

namespace mds {
namespace {

struct Size {
  std::int64_t rows, cols;
};

namespace bg = kernels::bias_grad_detail;
namespace kd = kernels::detail;
using emulated::StorageOf;
using kd::Storage;

template <Storage kS>
void check_bias_grad(Size size) {
  using T = typename StorageOf<kS>::Elem;
  const std::string what = std::string(emulated::storage_name(kS)) + " " +
                           std::to_string(size.rows) + "x" + std::to_string(size.cols);
  const auto n = static_cast<std::size_t>(size.rows * size.cols);
  const auto uc = static_cast<std::size_t>(size.cols);
  const emulated::GuardedBuffer<T> dout(emulated::to_storage<kS>(emulated::random_floats(n, 60)));
  const std::vector<float> dbias0 = emulated::random_floats(uc, 61);
  std::vector<float> want(uc);
  const std::vector<float> wide = emulated::to_fp32<kS>(dout.values());
  for (std::size_t c = 0; c < uc; ++c) {
    double sum = 0.0;
    for (std::size_t r = 0; r < static_cast<std::size_t>(size.rows); ++r) sum += wide[r * uc + c];
    want[c] = static_cast<float>(dbias0[c] + sum);
  }
  const auto run = [&](auto kernel, const kd::LaunchShape& shape) {
    emulated::GuardedBuffer<float> dbias(dbias0);
    emulated::launch_column_sums<1>(
        shape, size.rows, size.cols, {{dbias.data()}},
        [&](const auto& sink) { kernel(dout.data(), size.rows, size.cols, sink); });
    EXPECT_EQ(dbias.guard_bytes_written(), 0u) << what;
    return dbias.values();
  };
  const std::vector<float> one =
      run(bg::bias_grad_kernel<kS, false>, kd::column_shape(size.rows, size.cols, bg::kChunkRows));
  emulated::expect_close(one, want, 1e-5, what + " one column a thread");
  std::vector<float> picked;
  bool by_8 = false;
  bg::with_bias_grad_kernel<kS>(size.rows, size.cols, dout.data(),
                                [&](auto kernel, const kd::LaunchShape& shape) {
                                  by_8 = kernel == &bg::bias_grad_kernel<kS, true>;
                                  picked = run(kernel, shape);
                                });
  EXPECT_EQ(by_8, size.cols % 8 == 0) << what << ": which kernel";
  EXPECT_EQ(emulated::bits_of(picked), emulated::bits_of(one)) << what;
}

TEST(KernelsEmulatedBiasGrad, EightColumnsAThreadGiveTheOneColumnBits) {
  for (const Size size :
       {Size{1, 8}, Size{7, 264}, Size{300, 40}, Size{520, 776}, Size{3, 17}, Size{260, 2310}}) {
    check_bias_grad<Storage::kF32>(size);
    check_bias_grad<Storage::kBF16>(size);
    check_bias_grad<Storage::kF16>(size);
  }
}

}  // namespace
}  // namespace mds
