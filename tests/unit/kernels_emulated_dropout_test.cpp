// The dropout kernels' device code (kernels/dropout_kernels.cuh, philox.cuh) run on the CPU under
// the SIMT emulation with the launch shapes kernels/dropout.cu uses, against their CPU twins
// (ops/cpu/dropout): the mask element by element against ops::dropout_keep (sizes that are not
// multiples of the 4-element Philox group included), the forward plain and as bias-dropout-add,
// the backward written and accumulated, bit for bit, and the bias gradient's column sums within
// 1e-5 (tests/gpu/dropout_test.cpp's bounds), fp32 and the 16-bit storages (the fp32 op on widened
// inputs, rounded once); bias-dropout-add's one-pass backward against its three steps' kernels.
// Outputs start poisoned, guards stay untouched, reruns give the same bits; the grid-stride loop
// also runs on a narrowed grid. First the emulation (CUDA keywords, device_common.cuh's host
// twins), then the kernels.
#include "tests/unit/emulated_device_common.h"

#include "kernels/dropout_kernels.cuh"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/dropout.h"
#include "ops/dropout.h"
#include "ops/philox.h"
#include "tests/unit/emulated_column_sums.h"
#include "tests/unit/emulated_compare.h"
#include "tests/unit/guarded_buffer.h"

namespace mds {
namespace {

namespace dk = kernels::dropout_detail;
using emulated::bits_of;
using emulated::GuardedBuffer;
using emulated::StorageOf;
using emulated::to_fp32;
using emulated::to_storage;
using kernels::detail::Storage;
using ops::DropoutStream;

const DropoutStream kStreams[] = {
    {0.1f, 1234, 0}, {0.5f, 0xDEADBEEFCAFEull, 77ull << 40}, {0.0f, 5, 9}};

TEST(KernelsEmulatedDropout, MaskIsTheCpuMask) {
  for (const DropoutStream& stream : kStreams) {
    for (const std::int64_t n : {1, 3, 255, 256, 257, 1000, 4099}) {
      SCOPED_TRACE(testing::Message() << "p=" << stream.p << " n=" << n);
      const auto un = static_cast<std::size_t>(n);
      // x = 1: out is the factor, scale or 0, so it spells the mask.
      const GuardedBuffer<float> ones(std::vector<float>(un, 1.0f));
      GuardedBuffer<float> out(un);
      emulated::launch(dk::groups_shape(n), [&] {
        dk::forward_kernel<Storage::kF32, Storage::kF32>(out.data(), ones.data(), nullptr, nullptr,
                                                         n, n, stream, dk::keep_scale(stream));
      });
      const std::vector<float> got = out.values();
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < un; ++i) {
        mismatches += (got[i] != 0.0f) != ops::dropout_keep(stream, i) ? 1 : 0;
        mismatches += got[i] != 0.0f && got[i] != dk::keep_scale(stream) ? 1 : 0;
      }
      EXPECT_EQ(mismatches, 0u);
      EXPECT_EQ(out.guard_bytes_written(), 0u);
    }
  }
}

// bias-dropout-add's one-pass backward against the kernels of its three steps, bit for bit: dbias
// as bias_grad8_kernel over the same 64-row chunks, dresidual as dresidual + dout rounded once,
// dx as backward8_kernel (written, accumulated, and in place over dout); without a residual too.
template <Storage kS>
void check_one_pass_backward(const DropoutStream& stream, std::int64_t rows, std::int64_t cols) {
  using T = typename StorageOf<kS>::Elem;
  namespace kd = kernels::detail;
  const std::string what = std::string(emulated::storage_name(kS)) +
                           " p=" + std::to_string(stream.p) + " " + std::to_string(rows) + "x" +
                           std::to_string(cols) + " one pass";
  const std::int64_t n = rows * cols;
  const auto un = static_cast<std::size_t>(n), uc = static_cast<std::size_t>(cols);
  const float scale = dk::keep_scale(stream);
  const kd::LaunchShape shape = kd::column8_shape(rows, cols, dk::kBackwardChunkRows);
  const GuardedBuffer<T> dout(to_storage<kS>(emulated::random_floats(un, 70)));
  const std::vector<T> residual0 = to_storage<kS>(emulated::random_floats(un, 71));
  const std::vector<T> acc0 = to_storage<kS>(emulated::random_floats(un, 72));
  const std::vector<float> dbias0 = emulated::random_floats(uc, 73);

  GuardedBuffer<float> want_dbias(dbias0);
  emulated::launch_column_sums<1>(shape, rows, cols, {{want_dbias.data()}}, [&](const auto& sink) {
    dk::bias_grad8_kernel<kS, dk::kBackwardChunkRows>(dout.data(), rows, cols, stream, scale, sink);
  });
  std::vector<float> sum = to_fp32<kS>(residual0);
  const std::vector<float> wdout = to_fp32<kS>(dout.values());
  for (std::size_t i = 0; i < un; ++i) sum[i] = sum[i] + wdout[i];
  const std::vector<T> want_residual = to_storage<kS>(sum);
  GuardedBuffer<T> want_dx(un);
  const auto backward8 = [&](bool accumulate) {
    want_dx.assign(accumulate ? acc0 : std::vector<T>(un));
    emulated::launch(kd::chunks_of_8_shape(n), [&] {
      dk::backward8_kernel<kS>(want_dx.data(), dout.data(), n, stream, scale, accumulate);
    });
    return bits_of(want_dx.values());
  };

  GuardedBuffer<T> dx(un), dresidual(un), in_place(dout.values());
  GuardedBuffer<float> dbias(dbias0);
  const auto one_pass = [&](bool accumulate, bool with_residual, T* dx_memory) {
    if (dx_memory == dx.data()) {
      if (accumulate) {
        dx.assign(acc0);
      } else {
        dx.poison();
      }
    }
    dresidual.assign(residual0);
    dbias.assign(dbias0);
    emulated::launch_column_sums<1>(shape, rows, cols, {{dbias.data()}}, [&](const auto& sink) {
      dk::bias_dropout_add_backward8_kernel<kS>(dx_memory,
                                                with_residual ? dresidual.data() : nullptr,
                                                dx_memory == dx.data() ? dout.data() : dx_memory,
                                                rows, cols, stream, scale, accumulate, sink);
    });
    EXPECT_EQ(bits_of(dbias.values()), bits_of(want_dbias.values())) << what << " dbias";
    EXPECT_EQ(bits_of(dresidual.values()), bits_of(with_residual ? want_residual : residual0))
        << what << " dresidual";
    EXPECT_EQ(dx.guard_bytes_written() + dresidual.guard_bytes_written() +
                  dbias.guard_bytes_written() + in_place.guard_bytes_written(),
              0u)
        << what;
  };
  for (const bool accumulate : {false, true}) {
    for (const bool with_residual : {true, false}) {
      one_pass(accumulate, with_residual, dx.data());
      EXPECT_EQ(bits_of(dx.values()), backward8(accumulate))
          << what << " dx, accumulate " << accumulate;
    }
  }
  one_pass(false, true, in_place.data());
  EXPECT_EQ(bits_of(in_place.values()), backward8(false)) << what << " dx in place";
}

template <Storage kS>
void check_storage(const DropoutStream& stream, std::int64_t rows, std::int64_t cols) {
  using T = typename StorageOf<kS>::Elem;
  const std::string what = std::string(emulated::storage_name(kS)) +
                           " p=" + std::to_string(stream.p) + " " + std::to_string(rows) + "x" +
                           std::to_string(cols);
  const std::int64_t n = rows * cols;
  const auto un = static_cast<std::size_t>(n), uc = static_cast<std::size_t>(cols);
  const float scale = dk::keep_scale(stream);
  const GuardedBuffer<T> x(to_storage<kS>(emulated::random_floats(un, 50)));
  const GuardedBuffer<T> residual(to_storage<kS>(emulated::random_floats(un, 52)));
  const GuardedBuffer<T> dout(to_storage<kS>(emulated::random_floats(un, 53)));
  const GuardedBuffer<float> bias(emulated::random_floats(uc, 51));
  const std::vector<T> acc0 = to_storage<kS>(emulated::random_floats(un, 54));
  const std::vector<float> dbias0 = emulated::random_floats(uc, 55);
  const std::vector<float> wx = to_fp32<kS>(x.values()), wres = to_fp32<kS>(residual.values());
  const std::vector<float> wdout = to_fp32<kS>(dout.values());

  std::vector<float> plain(un), bda(un), dx(un), acc = to_fp32<kS>(acc0), dbias = dbias0;
  ops::cpu::dropout_forward(plain.data(), wx.data(), nullptr, nullptr, n, cols, stream);
  ops::cpu::dropout_forward(bda.data(), wx.data(), bias.data(), wres.data(), n, cols, stream);
  ops::cpu::dropout_backward(dx.data(), wdout.data(), n, stream, false);
  ops::cpu::dropout_backward(acc.data(), wdout.data(), n, stream, true);
  ops::cpu::dropout_bias_grad(dbias.data(), wdout.data(), rows, cols, stream);

  GuardedBuffer<T> out(un);
  const auto forward = [&](const float* b, const T* r) {
    out.poison();
    emulated::launch(dk::groups_shape(n), [&] {
      dk::forward_kernel<kS, Storage::kF32>(out.data(), x.data(), b, r, n, cols, stream, scale);
    });
    EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
    return out.values();
  };
  const auto backward = [&](bool accumulate) {
    if (accumulate) {
      out.assign(acc0);
    } else {
      out.poison();
    }
    emulated::launch(dk::groups_shape(n), [&] {
      dk::backward_kernel<kS>(out.data(), dout.data(), n, stream, scale, accumulate);
    });
    EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
    return out.values();
  };
  GuardedBuffer<float> got_dbias(dbias0);
  const auto bias_grad = [&] {
    got_dbias.assign(dbias0);
    emulated::launch_column_sums<1>(rows, cols, {{got_dbias.data()}}, [&](const auto& sink) {
      dk::bias_grad_kernel<kS>(dout.data(), rows, cols, stream, scale, sink);
    });
    EXPECT_EQ(got_dbias.guard_bytes_written(), 0u) << what;
    return got_dbias.values();
  };
  const auto got_plain = forward(nullptr, nullptr);
  emulated::expect_activation_equal<kS>(got_plain, plain, what + " forward");
  emulated::expect_activation_equal<kS>(forward(bias.data(), residual.data()), bda,
                                        what + " bias-dropout-add");
  emulated::expect_activation_equal<kS>(backward(false), dx, what + " backward");
  emulated::expect_activation_equal<kS>(backward(true), acc, what + " backward accumulate");
  const auto got_db = bias_grad();
  emulated::expect_close(got_db, dbias, 1e-5, what + " bias grad");
  EXPECT_EQ(bits_of(forward(nullptr, nullptr)), bits_of(got_plain)) << what << " rerun";
  EXPECT_EQ(bits_of(bias_grad()), bits_of(got_db)) << what << " rerun";
  if (cols % 4 == 0) {  // each Philox block drawn once (shuffles): the same bits
    got_dbias.assign(dbias0);
    emulated::launch_column_sums<1>(rows, cols, {{got_dbias.data()}}, [&](const auto& sink) {
      dk::bias_grad_shared_kernel<kS>(dout.data(), rows, cols, stream, scale, sink);
    });
    EXPECT_EQ(got_dbias.guard_bytes_written(), 0u) << what;
    EXPECT_EQ(bits_of(got_dbias.values()), bits_of(got_db)) << what << " shared draws";
  }
  if (kernels::detail::fits_columns8(cols, {dout.data()})) {  // eight columns a thread: likewise
    got_dbias.assign(dbias0);
    emulated::launch_column_sums<1>(kernels::detail::column8_shape(rows, cols), rows, cols,
                                    {{got_dbias.data()}}, [&](const auto& sink) {
                                      dk::bias_grad8_kernel<kS>(dout.data(), rows, cols, stream,
                                                                scale, sink);
                                    });
    EXPECT_EQ(got_dbias.guard_bytes_written(), 0u) << what;
    EXPECT_EQ(bits_of(got_dbias.values()), bits_of(got_db)) << what << " eight columns a thread";
  }

  if (kernels::detail::fits_columns8(cols, {dout.data()}))
    check_one_pass_backward<kS>(stream, rows, cols);

  // Eight elements a thread where the sizes allow (the buffers are 16-byte aligned): the bits of
  // the four-a-thread kernels.
  const bool by_8 = kernels::detail::fits_chunks_of_8(n, cols, bias.data(),
                                                      {out.data(), x.data(), residual.data()});
  EXPECT_EQ(by_8, n % 8 == 0 && cols % 8 == 0) << what;
  if (!by_8) return;
  const auto forward8 = [&](const float* b, const T* r) {
    out.poison();
    emulated::launch(kernels::detail::chunks_of_8_shape(n), [&] {
      dk::forward8_kernel<kS, Storage::kF32>(out.data(), x.data(), b, r, n, cols, stream, scale);
    });
    EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
    return bits_of(out.values());
  };
  const auto backward8 = [&](bool accumulate) {
    if (accumulate) {
      out.assign(acc0);
    } else {
      out.poison();
    }
    emulated::launch(kernels::detail::chunks_of_8_shape(n), [&] {
      dk::backward8_kernel<kS>(out.data(), dout.data(), n, stream, scale, accumulate);
    });
    EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
    return bits_of(out.values());
  };
  EXPECT_EQ(forward8(nullptr, nullptr), bits_of(forward(nullptr, nullptr))) << what << " by 8";
  EXPECT_EQ(forward8(bias.data(), residual.data()), bits_of(forward(bias.data(), residual.data())))
      << what << " bias-dropout-add by 8";
  EXPECT_EQ(backward8(false), bits_of(backward(false))) << what << " backward by 8";
  EXPECT_EQ(backward8(true), bits_of(backward(true))) << what << " backward accumulate by 8";
}

struct Size {
  std::int64_t rows, cols;
};

TEST(KernelsEmulatedDropout, ForwardBackwardAndBiasGradMatchCpu) {
  // {600, 40}: three row chunks of the bias gradient's column sums (256 + 256 + 88 rows).
  constexpr Size kSizes[] = {{1, 1},    {3, 17},   {7, 255},  {5, 256}, {4, 1000},
                             {2, 4099}, {33, 100}, {129, 40}, {600, 40}};
  for (const DropoutStream& stream : kStreams) {
    for (const Size size : kSizes) check_storage<Storage::kF32>(stream, size.rows, size.cols);
  }
}

TEST(KernelsEmulatedDropout, Bf16AndFp16MatchCpu) {
  // {130, 24}: three 64-row chunks of the one-pass backward, the last one partial.
  constexpr Size kSizes[] = {{3, 17}, {5, 256}, {33, 100}, {130, 24}};
  for (const DropoutStream& stream : kStreams) {
    for (const Size size : kSizes) {
      check_storage<Storage::kBF16>(stream, size.rows, size.cols);
      check_storage<Storage::kF16>(stream, size.rows, size.cols);
    }
  }
}

// Bias-dropout-add with a 16-bit bias (kP = kS, widened on load) against the same bias widened to
// fp32 (kP = kF32): bit for bit.
template <Storage kS>
void check_16bit_bias(const DropoutStream& stream, std::int64_t rows, std::int64_t cols) {
  using T = typename StorageOf<kS>::Elem;
  const std::string what = std::string(emulated::storage_name(kS)) +
                           " p=" + std::to_string(stream.p) + " " + std::to_string(rows) + "x" +
                           std::to_string(cols);
  const std::int64_t n = rows * cols;
  const auto un = static_cast<std::size_t>(n), uc = static_cast<std::size_t>(cols);
  const GuardedBuffer<T> x(to_storage<kS>(emulated::random_floats(un, 60)));
  const GuardedBuffer<T> residual(to_storage<kS>(emulated::random_floats(un, 61)));
  const GuardedBuffer<T> bias16(to_storage<kS>(emulated::random_floats(uc, 62)));
  const GuardedBuffer<float> bias32(to_fp32<kS>(bias16.values()));
  GuardedBuffer<T> out(un);
  const auto run = [&]<Storage kP>(const void* bias) {
    out.poison();
    emulated::launch(dk::groups_shape(n), [&] {
      dk::forward_kernel<kS, kP>(out.data(), x.data(), bias, residual.data(), n, cols, stream,
                                 dk::keep_scale(stream));
    });
    EXPECT_EQ(out.guard_bytes_written(), 0u) << what;
    return bits_of(out.values());
  };
  EXPECT_EQ(run.template operator()<kS>(bias16.data()),
            run.template operator()<Storage::kF32>(bias32.data()))
      << what;
}

TEST(KernelsEmulatedDropout, SixteenBitBiasEqualsItsFp32Widening) {
  for (const DropoutStream& stream : kStreams) {
    for (const Size size : {Size{1, 1}, Size{3, 17}, Size{5, 256}, Size{33, 100}}) {
      check_16bit_bias<Storage::kBF16>(stream, size.rows, size.cols);
      check_16bit_bias<Storage::kF16>(stream, size.rows, size.cols);
    }
  }
}

// keep_threshold16's integer test decides as philox_uniform16(half) >= p, for every half and
// probabilities from 0 to 1 (those around a threshold's edges too); philox_half takes an
// element's 16 bits as ops::philox_half does.
TEST(KernelsEmulatedDropout, KeepThreshold16DecidesAsTheUniform) {
  for (const float p : {0.0f, 1e-7f, 0x1p-16f, 0.1f, 0.3f, 1.0f / 3.0f, 0.5f, 0.75f,
                        1.0f - 0x1p-16f, 0.9999999f, 1.0f}) {
    const std::uint32_t threshold = kernels::detail::keep_threshold16(p);
    for (std::uint32_t half = 0; half < 65536; ++half) {
      ASSERT_EQ(half >= threshold, ops::philox_uniform16(half) >= p)
          << "p=" << p << " half=" << half;
    }
  }
  const ops::PhiloxCounter host = ops::philox_block(7, 3, 11);
  const kernels::detail::PhiloxWords device = kernels::detail::philox_block(7, 3, 11);
  for (std::uint64_t e = 88; e < 96; ++e) {
    EXPECT_EQ(kernels::detail::philox_half(device, e), ops::philox_half(host, e)) << e;
  }
  EXPECT_EQ(ops::philox_half(host, 89), host[0] >> 16);
  EXPECT_EQ(ops::philox_half(host, 94), host[3] & 0xFFFFu);
}

TEST(KernelsEmulatedDropout, GridStrideLoopWrapsOnANarrowGrid) {
  const DropoutStream stream = kStreams[1];
  const std::int64_t n = 4099;  // 1025 groups of four on one block of 256 threads
  const auto un = static_cast<std::size_t>(n);
  const GuardedBuffer<float> x(emulated::random_floats(un, 56));
  std::vector<float> want(un);
  ops::cpu::dropout_forward(want.data(), x.data(), nullptr, nullptr, n, n, stream);
  GuardedBuffer<float> out(un);
  emulated::launch_narrowed(dk::groups_shape(n), 1, [&] {
    dk::forward_kernel<Storage::kF32, Storage::kF32>(out.data(), x.data(), nullptr, nullptr, n, n,
                                                     stream, dk::keep_scale(stream));
  });
  EXPECT_EQ(bits_of(out.values()), bits_of(want));
  EXPECT_EQ(out.guard_bytes_written(), 0u);
}

}  // namespace
}  // namespace mds
