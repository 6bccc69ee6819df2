// The GeLU kernels' device code (kernels/gelu_kernels.cuh) run on the CPU under the SIMT emulation
// with the launch shapes kernels/gelu.cu uses, against their CPU twins (ops/cpu/gelu): forward and
// backward, plain and with a bias, dbias by the column-sum kernel, every GeluKind, fp32 and the
// 16-bit storages (fp32 math on widened loads, each output rounded once). Bounds of
// tests/gpu/gelu_test.cpp: 2e-6 for out and dx (the CPU's vector_tanh against tanhf), 1e-5 for
// dbias (summation order); 16-bit outputs within one ulp of the fp32 reference rounded. Outputs
// start poisoned (accumulated ones from known values), guards stay untouched, reruns give the
// same bits.
// First the emulation (CUDA keywords, device_common.cuh's host twins), then the kernels.
#include "tests/unit/emulated_device_common.h"

#include "kernels/gelu_kernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ops/cpu/gelu.h"
#include "tests/unit/emulated_column_sums.h"
#include "tests/unit/emulated_compare.h"
#include "tests/unit/guarded_buffer.h"

namespace mds {
namespace {

namespace gk = kernels::gelu_detail;
using emulated::bits_of;
using emulated::GuardedBuffer;
using emulated::StorageOf;
using emulated::to_fp32;
using emulated::to_storage;
using kernels::detail::Storage;
using ops::GeluKind;

struct Size {
  std::int64_t rows, cols;
};
// Straddling the 256-thread block and the 32-column tile of the column sums.
// {600, 40}: three row chunks of the column sums (256 + 256 + 88 rows).
constexpr Size kSizes[] = {{1, 1},    {3, 17},   {7, 255},  {5, 256},
                           {4, 1000}, {33, 100}, {129, 40}, {600, 40}};
constexpr GeluKind kKinds[] = {GeluKind::kTanhFused, GeluKind::kTanhOpenAI, GeluKind::kErf};

const char* kind_name(GeluKind kind) {
  return kind == GeluKind::kTanhFused    ? "tanh-fused"
         : kind == GeluKind::kTanhOpenAI ? "openai"
                                         : "erf";
}

template <Storage kS, GeluKind kKind>
void check_forward(Size size, const std::string& what) {
  using T = typename StorageOf<kS>::Elem;
  const std::int64_t n = size.rows * size.cols;
  const auto un = static_cast<std::size_t>(n);
  const GuardedBuffer<T> x(to_storage<kS>(emulated::random_floats(un, 1)));
  const GuardedBuffer<float> bias(emulated::random_floats(static_cast<std::size_t>(size.cols), 2));
  const std::vector<float> wx = to_fp32<kS>(x.values());
  std::vector<float> plain(un), biased(un);
  ops::cpu::gelu_forward(plain.data(), wx.data(), n, kKind);
  ops::cpu::bias_gelu_forward(biased.data(), wx.data(), bias.data(), size.rows, size.cols, kKind);

  GuardedBuffer<T> out(un);
  const auto run = [&](const float* b, std::int64_t cols) {
    out.poison();
    emulated::launch(gk::elementwise_shape(n), [&] {
      gk::forward_kernel<kS, Storage::kF32, kKind>(out.data(), x.data(), b, n, cols);
    });
    EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
    return out.values();
  };
  const auto got_plain = run(nullptr, 1);
  emulated::expect_activation_close<kS>(got_plain, plain, 2e-6, what + " forward");
  EXPECT_EQ(bits_of(run(nullptr, 1)), bits_of(got_plain)) << what << " rerun";
  const auto got_biased = run(bias.data(), size.cols);
  emulated::expect_activation_close<kS>(got_biased, biased, 2e-6, what + " bias forward");

  // Eight elements a thread where the sizes allow (the buffers are 16-byte aligned): the bits of
  // the one-element kernel.
  const auto run8 = [&](const float* b, std::int64_t cols) {
    EXPECT_TRUE(kernels::detail::fits_chunks_of_8(n, cols, b, {out.data(), x.data()})) << what;
    out.poison();
    emulated::launch(kernels::detail::chunks_of_8_shape(n), [&] {
      gk::forward8_kernel<kS, Storage::kF32, kKind>(out.data(), x.data(), b, n, cols);
    });
    EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
    return out.values();
  };
  if (n % 8 == 0) {
    EXPECT_EQ(bits_of(run8(nullptr, 1)), bits_of(got_plain)) << what << " by 8";
  }
  if (size.cols % 8 == 0) {
    EXPECT_EQ(bits_of(run8(bias.data(), size.cols)), bits_of(got_biased)) << what << " bias by 8";
  } else {
    EXPECT_FALSE(
        kernels::detail::fits_chunks_of_8(n, size.cols, bias.data(), {out.data(), x.data()}));
  }
}

template <Storage kS, GeluKind kKind>
void check_backward(Size size, const std::string& what) {
  using T = typename StorageOf<kS>::Elem;
  const std::int64_t n = size.rows * size.cols;
  const auto un = static_cast<std::size_t>(n), uc = static_cast<std::size_t>(size.cols);
  const GuardedBuffer<T> x(to_storage<kS>(emulated::random_floats(un, 3)));
  const GuardedBuffer<T> dout(to_storage<kS>(emulated::random_floats(un, 4)));
  const GuardedBuffer<float> bias(emulated::random_floats(uc, 5));
  const std::vector<T> dx0 = to_storage<kS>(emulated::random_floats(un, 6));
  const std::vector<float> dbias0 = emulated::random_floats(uc, 7);
  const std::vector<float> wx = to_fp32<kS>(x.values()), wdout = to_fp32<kS>(dout.values());

  // dx += g (plain; biased with and without dbias), dbias += Σ_rows g.
  std::vector<float> dx_plain = to_fp32<kS>(dx0), dx_biased = dx_plain, dx_nodbias = dx_plain;
  std::vector<float> dbias = dbias0;
  ops::cpu::gelu_backward(dx_plain.data(), wdout.data(), wx.data(), n, kKind);
  ops::cpu::bias_gelu_backward(dx_biased.data(), dbias.data(), wdout.data(), wx.data(), bias.data(),
                               size.rows, size.cols, kKind);
  ops::cpu::bias_gelu_backward(dx_nodbias.data(), nullptr, wdout.data(), wx.data(), bias.data(),
                               size.rows, size.cols, kKind);

  GuardedBuffer<T> dx(dx0);
  GuardedBuffer<float> got_dbias(dbias0);
  const auto run = [&](auto launch_kernel) {
    dx.assign(dx0);
    got_dbias.assign(dbias0);
    launch_kernel();
    EXPECT_EQ(dx.guard_bytes_written() + got_dbias.guard_bytes_written(), 0u) << what;
    return std::make_pair(dx.values(), got_dbias.values());
  };
  const auto plain = [&](bool accumulate = true) {
    emulated::launch(gk::elementwise_shape(n), [&] {
      gk::backward_kernel<kS, Storage::kF32, kKind>(dx.data(), dout.data(), x.data(), nullptr, n, 1,
                                                    accumulate);
    });
  };
  const auto nodbias = [&](bool accumulate = true) {
    emulated::launch(gk::elementwise_shape(n), [&] {
      gk::backward_kernel<kS, Storage::kF32, kKind>(dx.data(), dout.data(), x.data(), bias.data(),
                                                    n, size.cols, accumulate);
    });
  };
  // The kernel gelu.cu picks (eight columns a thread where cols and alignment allow), or the
  // one-column kernel.
  const auto with_dbias_by = [&](bool by_8, bool accumulate, const float* b) {
    const auto stage = [&](auto kernel, const kernels::detail::LaunchShape& shape) {
      emulated::launch_column_sums<1>(
          shape, size.rows, size.cols, {{got_dbias.data()}}, [&](const auto& sink) {
            kernel(dx.data(), dout.data(), x.data(), b, size.rows, size.cols, accumulate, sink);
          });
    };
    if (by_8) {
      gk::with_backward_bias_kernel<kS, Storage::kF32, kKind>(
          size.rows, size.cols, {dx.data(), dout.data(), x.data(), b}, stage);
    } else {
      stage(gk::backward_bias_kernel<kS, Storage::kF32, kKind>,
            kernels::detail::column_shape(size.rows, size.cols));
    }
  };
  const auto with_dbias = [&](bool accumulate = true) {
    with_dbias_by(true, accumulate, bias.data());
  };
  const auto with_dbias_by_1 = [&](bool accumulate = true) {
    with_dbias_by(false, accumulate, bias.data());
  };
  emulated::expect_activation_close<kS>(run(plain).first, dx_plain, 2e-6, what + " backward");
  emulated::expect_activation_close<kS>(run(nodbias).first, dx_nodbias, 2e-6,
                                        what + " bias backward, no dbias");
  const auto got = run(with_dbias);
  emulated::expect_activation_close<kS>(got.first, dx_biased, 2e-6, what + " bias backward dx");
  emulated::expect_close(got.second, dbias, 1e-5, what + " bias backward dbias");
  const auto again = run(with_dbias);
  EXPECT_EQ(bits_of(again.first), bits_of(got.first)) << what << " rerun";
  EXPECT_EQ(bits_of(again.second), bits_of(got.second)) << what << " rerun";
  const auto by_1 = run(with_dbias_by_1);  // the one-column kernel: the same bits
  EXPECT_EQ(bits_of(by_1.first), bits_of(got.first)) << what << " one column a thread";
  EXPECT_EQ(bits_of(by_1.second), bits_of(got.second)) << what << " one column a thread";

  // No bias, x holding it already (the GEMM epilogue's pre-activation): the plain backward's dx
  // bits, and their column sums as the host's.
  std::vector<float> dbias_unbiased = dbias0, dx_unbiased = to_fp32<kS>(dx0);
  ops::cpu::bias_gelu_backward(dx_unbiased.data(), dbias_unbiased.data(), wdout.data(), wx.data(),
                               nullptr, size.rows, size.cols, kKind);
  EXPECT_EQ(dx_unbiased, dx_plain) << what << " host, no bias";
  const auto plain_dx = run(plain).first;
  for (const bool by_8 : {true, false}) {
    const auto unbiased = run([&] { with_dbias_by(by_8, true, nullptr); });
    EXPECT_EQ(bits_of(unbiased.first), bits_of(plain_dx)) << what << " no bias, by 8: " << by_8;
    emulated::expect_close(unbiased.second, dbias_unbiased, 1e-5,
                           what + " no bias, dbias, by 8: " + std::to_string(by_8));
  }

  // accumulate false (dx = g): from NaNs, every element written with the values of accumulating
  // onto zeros (equal as numbers: −0 may stay −0), the same dbias.
  const std::vector<T> zeros = to_storage<kS>(std::vector<float>(un, 0.0f));
  const std::vector<T> nans = to_storage<kS>(std::vector<float>(un, NAN));
  for (const auto& [launch_kernel, name] : {std::pair{std::function<void(bool)>(plain), "plain"},
                                            {nodbias, "no dbias"},
                                            {with_dbias, "dbias"},
                                            {with_dbias_by_1, "dbias, one column a thread"}}) {
    dx.assign(zeros);
    got_dbias.assign(dbias0);
    launch_kernel(true);
    const std::vector<float> onto_zeros = to_fp32<kS>(dx.values());
    const std::vector<float> summed = got_dbias.values();
    dx.assign(nans);
    got_dbias.assign(dbias0);
    launch_kernel(false);
    EXPECT_EQ(to_fp32<kS>(dx.values()), onto_zeros) << what << " overwrite " << name;
    EXPECT_EQ(bits_of(got_dbias.values()), bits_of(summed)) << what << " overwrite " << name;
  }
}

template <Storage kS>
void check_storage(const std::vector<Size>& sizes) {
  for (const GeluKind kind : kKinds) {
    for (const Size size : sizes) {
      const std::string what = std::string(emulated::storage_name(kS)) + " " + kind_name(kind) +
                               " " + std::to_string(size.rows) + "x" + std::to_string(size.cols);
      gk::with_kind(kind, [&](auto k) {
        check_forward<kS, decltype(k)::value>(size, what);
        check_backward<kS, decltype(k)::value>(size, what);
      });
    }
  }
}

TEST(KernelsEmulatedGelu, Fp32EveryKindMatchesCpu) {
  check_storage<Storage::kF32>({std::begin(kSizes), std::end(kSizes)});
}

// The 16-bit instances share every line but the loads and stores: fewer sizes.
TEST(KernelsEmulatedGelu, Bf16AndFp16EveryKindWithinOneUlp) {
  check_storage<Storage::kBF16>({{3, 17}, {5, 256}, {33, 100}});
  check_storage<Storage::kF16>({{3, 17}, {5, 256}, {33, 100}});
}

// A 16-bit bias (kP = kS, widened on load) against the same bias widened to fp32 (kP = kF32):
// forward, dx with and without dbias, and dbias, bit for bit.
template <Storage kS, GeluKind kKind>
void check_16bit_bias(Size size, const std::string& what) {
  using T = typename StorageOf<kS>::Elem;
  const std::int64_t n = size.rows * size.cols;
  const auto un = static_cast<std::size_t>(n), uc = static_cast<std::size_t>(size.cols);
  const GuardedBuffer<T> x(to_storage<kS>(emulated::random_floats(un, 11)));
  const GuardedBuffer<T> dout(to_storage<kS>(emulated::random_floats(un, 12)));
  const GuardedBuffer<T> bias16(to_storage<kS>(emulated::random_floats(uc, 13)));
  const GuardedBuffer<float> bias32(to_fp32<kS>(bias16.values()));
  const std::vector<T> dx0 = to_storage<kS>(emulated::random_floats(un, 14));
  const std::vector<float> dbias0 = emulated::random_floats(uc, 15);
  GuardedBuffer<T> out(un), dx(un);
  GuardedBuffer<float> dbias(uc);
  // Forward, backward without dbias, backward with dbias: out, dx, dx, dbias.
  const auto run = [&]<Storage kP>(const void* bias) {
    std::vector<std::vector<std::uint64_t>> results;
    out.poison();
    emulated::launch(gk::elementwise_shape(n), [&] {
      gk::forward_kernel<kS, kP, kKind>(out.data(), x.data(), bias, n, size.cols);
    });
    results.push_back(bits_of(out.values()));
    dx.assign(dx0);
    emulated::launch(gk::elementwise_shape(n), [&] {
      gk::backward_kernel<kS, kP, kKind>(dx.data(), dout.data(), x.data(), bias, n, size.cols,
                                         true);
    });
    results.push_back(bits_of(dx.values()));
    dx.assign(dx0);
    dbias.assign(dbias0);
    gk::with_backward_bias_kernel<kS, kP, kKind>(
        size.rows, size.cols, {dx.data(), dout.data(), x.data(), bias},
        [&](auto kernel, const kernels::detail::LaunchShape& shape) {
          emulated::launch_column_sums<1>(
              shape, size.rows, size.cols, {{dbias.data()}}, [&](const auto& sink) {
                kernel(dx.data(), dout.data(), x.data(), bias, size.rows, size.cols, true, sink);
              });
        });
    results.push_back(bits_of(dx.values()));
    results.push_back(bits_of(dbias.values()));
    EXPECT_EQ(out.guard_bytes_written() + dx.guard_bytes_written() + dbias.guard_bytes_written(),
              0u)
        << what;
    return results;
  };
  const auto wide = run.template operator()<Storage::kF32>(bias32.data());
  const auto narrow = run.template operator()<kS>(bias16.data());
  const char* names[] = {"forward", "backward dx", "bias backward dx", "bias backward dbias"};
  for (std::size_t k = 0; k < wide.size(); ++k) EXPECT_EQ(narrow[k], wide[k]) << what << names[k];
}

TEST(KernelsEmulatedGelu, SixteenBitBiasEqualsItsFp32Widening) {
  for (const GeluKind kind : kKinds) {
    for (const Size size : {Size{1, 1}, Size{3, 17}, Size{33, 100}, Size{9, 64}}) {
      const std::string what = std::string(kind_name(kind)) + " " + std::to_string(size.rows) +
                               "x" + std::to_string(size.cols) + " ";
      gk::with_kind(kind, [&](auto k) {
        check_16bit_bias<Storage::kBF16, decltype(k)::value>(size, "bf16 " + what);
        check_16bit_bias<Storage::kF16, decltype(k)::value>(size, "fp16 " + what);
      });
    }
  }
}

TEST(KernelsEmulatedGelu, GridStrideLoopWrapsOnANarrowGrid) {
  const std::int64_t n = 4099;
  const auto un = static_cast<std::size_t>(n);
  const GuardedBuffer<float> x(emulated::random_floats(un, 8));
  std::vector<float> want(un);
  ops::cpu::gelu_forward(want.data(), x.data(), n, GeluKind::kErf);
  GuardedBuffer<float> out(un);
  emulated::launch_narrowed(gk::elementwise_shape(n), 3, [&] {
    gk::forward_kernel<Storage::kF32, Storage::kF32, GeluKind::kErf>(out.data(), x.data(), nullptr,
                                                                     n, 1);
  });
  emulated::expect_close(out.values(), want, 2e-6, "erf forward on 3 blocks");
  EXPECT_EQ(out.guard_bytes_written(), 0u);
  // The eight-at-a-time kernel over 1024 chunks on one block: four passes.
  const std::int64_t n8 = 8192;
  const GuardedBuffer<float> x8(emulated::random_floats(static_cast<std::size_t>(n8), 9));
  std::vector<float> want8(static_cast<std::size_t>(n8));
  ops::cpu::gelu_forward(want8.data(), x8.data(), n8, GeluKind::kErf);
  GuardedBuffer<float> out8(static_cast<std::size_t>(n8));
  emulated::launch_narrowed(kernels::detail::chunks_of_8_shape(n8), 1, [&] {
    gk::forward8_kernel<Storage::kF32, Storage::kF32, GeluKind::kErf>(out8.data(), x8.data(),
                                                                      nullptr, n8, 1);
  });
  emulated::expect_close(out8.values(), want8, 2e-6, "erf forward by 8 on 1 block");
  EXPECT_EQ(out8.guard_bytes_written(), 0u);
}

}  // namespace
}  // namespace mds
