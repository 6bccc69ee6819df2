// The mixed-precision gradient kernels' device code (kernels/gradients_kernels.cuh) run on the CPU
// under the SIMT emulation with the launch shapes kernels/gradients.cu uses, against their CPU
// twins (ops/cpu/gradients): accumulate_rounded (fp32 and fp16 accumulators, every gradient
// dtype), round_through, scale_in_dtype (multiply and divide) bit for bit; the overflow flag
// exactly (and never cleared); sums_of_squares of empty, single, overlapping and block-straddling
// segments within 1e-12 of the CPU's, each bit-identical to the same kernels over that segment
// alone and on a rerun, and over bf16/fp16 elements bit-identical to the sums over their fp32
// widening (the norm of 16-bit weights). Bounds of tests/gpu/gradients_test.cpp. Guards stay
// untouched; the grid-stride loops also run on a narrowed grid.
// First the emulation (CUDA keywords, device_common.cuh's host twins), then the kernels.
#include "tests/unit/emulated_device_common.h"

#include "kernels/gradients_kernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/cpu/elementwise.h"
#include "ops/cpu/gradients.h"
#include "tests/unit/emulated_compare.h"
#include "tests/unit/guarded_buffer.h"

namespace mds {
namespace {

namespace gk = kernels::gradients_detail;
using emulated::bits_of;
using emulated::GuardedBuffer;
using emulated::StorageOf;
using emulated::to_fp32;
using emulated::to_storage;
using kernels::detail::Storage;
using tensor::DType;

constexpr std::int64_t kSizes[] = {1, 3, 255, 256, 257, 1000, 4099};
constexpr DType kFloatDtypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};

// `values` converted to `dtype` as raw bytes (ops/cpu's cast).
std::vector<std::uint8_t> as_bytes(const std::vector<float>& values, DType dtype) {
  std::vector<std::uint8_t> out(values.size() * tensor::dtype_size(dtype));
  ops::cpu::cast(out.data(), dtype, values.data(), DType::kFloat32,
                 static_cast<std::int64_t>(values.size()));
  return out;
}

TEST(KernelsEmulatedGradients, AccumulateRoundedIsBitIdenticalToCpu) {
  for (const std::int64_t n : kSizes) {
    const auto un = static_cast<std::size_t>(n);
    std::vector<float> values = emulated::random_floats(un, 60, -70000.0f, 70000.0f);
    if (un > 2) values[1] = -0.0f;  // a fresh accumulator turns it into +0
    const GuardedBuffer<float> micro(values);
    for (const DType accumulator : {DType::kFloat32, DType::kFloat16}) {
      for (const DType grad : kFloatDtypes) {
        for (const DType through : kFloatDtypes) {
          for (const bool fresh : {false, true}) {
            SCOPED_TRACE(testing::Message()
                         << tensor::dtype_name(accumulator) << " += " << tensor::dtype_name(grad)
                         << " through " << tensor::dtype_name(through) << " fresh " << fresh
                         << " n=" << n);
            std::vector<std::uint8_t> cpu =
                as_bytes(emulated::random_floats(un, 61, -5.0f, 5.0f), accumulator);
            GuardedBuffer<std::uint8_t> acc(cpu);
            const gk::AccumulateHow how{gk::half_of(grad), fresh, gk::half_of(through)};
            for (int round = 0; round < 2; ++round) {  // twice: the sum is read back too
              ops::cpu::accumulate_rounded(cpu.data(), accumulator, micro.data(), n, grad, fresh,
                                           through);
              emulated::launch(gk::elementwise_shape(n), [&] {
                if (accumulator == DType::kFloat32) {
                  gk::accumulate_fp32_kernel(reinterpret_cast<float*>(acc.data()), micro.data(), n,
                                             how);
                } else {
                  gk::accumulate_fp16_kernel(reinterpret_cast<std::uint16_t*>(acc.data()),
                                             micro.data(), n, how);
                }
              });
            }
            EXPECT_EQ(acc.values(), cpu);
            EXPECT_EQ(acc.guard_bytes_written(), 0u);
          }
        }
      }
    }
  }
}

TEST(KernelsEmulatedGradients, RoundThroughIsBitIdenticalToCpu) {
  for (const std::int64_t n : kSizes) {
    const auto values =
        emulated::random_floats(static_cast<std::size_t>(n), 62, -70000.0f, 70000.0f);
    for (const DType x_dtype : {DType::kFloat32, DType::kFloat16}) {
      for (const DType dtype : kFloatDtypes) {
        SCOPED_TRACE(testing::Message() << tensor::dtype_name(x_dtype) << " through "
                                        << tensor::dtype_name(dtype) << " n=" << n);
        std::vector<std::uint8_t> cpu = as_bytes(values, x_dtype);
        GuardedBuffer<std::uint8_t> x(cpu);
        ops::cpu::round_through(cpu.data(), x_dtype, n, dtype);
        emulated::launch(gk::elementwise_shape(n), [&] {
          if (x_dtype == DType::kFloat32) {
            gk::round_through_fp32_kernel(reinterpret_cast<float*>(x.data()), n,
                                          gk::half_of(dtype));
          } else {
            gk::round_through_fp16_kernel(reinterpret_cast<std::uint16_t*>(x.data()), n,
                                          gk::half_of(dtype));
          }
        });
        EXPECT_EQ(x.values(), cpu);
        EXPECT_EQ(x.guard_bytes_written(), 0u);
      }
    }
  }
}

TEST(KernelsEmulatedGradients, ScaleAndDivideInDtypeAreBitIdenticalToCpu) {
  for (const std::int64_t n : kSizes) {
    const auto values =
        emulated::random_floats(static_cast<std::size_t>(n), 63, -70000.0f, 70000.0f);
    for (const DType dtype : kFloatDtypes) {
      for (const bool divide : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << tensor::dtype_name(dtype) << (divide ? " / 3" : " * 1/3") << " n=" << n);
        const float operand = divide ? 3.0f : 1.0f / 3.0f;
        std::vector<std::uint8_t> cpu = as_bytes(values, dtype);
        GuardedBuffer<std::uint8_t> x(cpu);
        ops::cpu::scale_in_dtype(cpu.data(), dtype, n, operand, divide);
        emulated::launch(gk::elementwise_shape(n), [&] {
          gk::scale_in_dtype_kernel(x.data(), gk::half_of(dtype), n, operand, divide);
        });
        EXPECT_EQ(x.values(), cpu);
        EXPECT_EQ(x.guard_bytes_written(), 0u);
      }
    }
  }
}

// The flag kernel's verdict on `bytes` of `dtype`, from a flag starting at `initial`.
int emulated_flag(const std::vector<std::uint8_t>& bytes, DType dtype, std::int64_t n, int initial,
                  unsigned narrowed_blocks = 0) {
  const GuardedBuffer<std::uint8_t> x(bytes);
  GuardedBuffer<int> flag(std::vector<int>{initial});
  const auto body = [&] {
    gk::flag_inf_or_nan_kernel(flag.data(), x.data(), gk::half_of(dtype), n);
  };
  if (narrowed_blocks > 0) {
    emulated::launch_narrowed(gk::elementwise_shape(n), narrowed_blocks, body);
  } else {
    emulated::launch(gk::elementwise_shape(n), body);
  }
  EXPECT_EQ(flag.guard_bytes_written(), 0u);
  return flag.values()[0];
}

TEST(KernelsEmulatedGradients, OverflowFlagMatchesCpu) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::int64_t n : kSizes) {
    const auto un = static_cast<std::size_t>(n);
    for (const DType dtype : kFloatDtypes) {
      // Finite everywhere (fp16 values stay below its 65504 maximum), then one bad element at the
      // start, the middle, the end.
      const auto base = emulated::random_floats(un, 63, -60000.0f, 60000.0f);
      std::vector<std::vector<float>> cases = {base};
      for (const float bad : {inf, -inf, nan}) {
        for (const std::size_t at : {std::size_t{0}, un / 2, un - 1}) {
          cases.push_back(base);
          cases.back()[at] = bad;
        }
      }
      for (std::size_t c = 0; c < cases.size(); ++c) {
        SCOPED_TRACE(testing::Message()
                     << tensor::dtype_name(dtype) << " n=" << n << " case " << c);
        const std::vector<std::uint8_t> bytes = as_bytes(cases[c], dtype);
        const bool want = ops::cpu::has_inf_or_nan(bytes.data(), dtype, n);
        EXPECT_EQ(want, c != 0);
        EXPECT_EQ(emulated_flag(bytes, dtype, n, 0), want ? 1 : 0);
        // The grid-stride loop: an element past the first 256 found by a thread's later turn.
        if (n > 256) {
          EXPECT_EQ(emulated_flag(bytes, dtype, n, 0, 1), want ? 1 : 0);
        }
      }
    }
  }
  // The flag is only ever set, never cleared.
  EXPECT_EQ(emulated_flag(as_bytes({1.0f, 2.0f}, DType::kFloat32), DType::kFloat32, 2, 1), 1);
}

// kernels::sums_of_squares(out, partials, x, dtype, segments, count) as gradients.cu launches it,
// for x stored as kS.
template <Storage kS = Storage::kF32>
std::vector<double> emulated_sums(const GuardedBuffer<typename StorageOf<kS>::Elem>& x,
                                  const std::vector<ops::SquaresSegment>& segments) {
  const auto count = static_cast<std::int64_t>(segments.size());
  const GuardedBuffer<ops::SquaresSegment> d_segments(segments);
  GuardedBuffer<double> out(segments.size()),
      partials(segments.size() * static_cast<std::size_t>(kernels::kSumOfSquaresPartials));
  emulated::launch(gk::segment_partials_shape(count), [&] {
    gk::segment_partials_kernel<kS>(partials.data(), x.data(), d_segments.data(), count);
  });
  for (std::int64_t first = 0; first < count; first += gk::kMaxGridY) {
    emulated::launch(gk::segment_totals_shape(gk::totals_chunk(count, first)), [&] {
      gk::segment_totals_kernel(out.data() + first,
                                partials.data() + first * kernels::kSumOfSquaresPartials);
    });
  }
  EXPECT_EQ(out.guard_bytes_written() + partials.guard_bytes_written(), 0u);
  return out.values();
}

TEST(KernelsEmulatedGradients, SumsOfSquaresEqualOneSumPerSegmentAndRepeat) {
  constexpr std::int64_t kN = 20000;
  const GuardedBuffer<float> x(
      emulated::random_floats(static_cast<std::size_t>(kN), 64, -2.0f, 2.0f));
  // Whole-buffer, empty, single-element, overlapping and block-straddling segments (each takes
  // 512 blocks of the emulation: few of them).
  const std::vector<ops::SquaresSegment> segments = {
      {0, kN}, {7, 0}, {64, 1}, {100, 513}, {kN - 4099, 4099}};
  std::vector<double> cpu(segments.size());
  ops::cpu::sums_of_squares(cpu.data(), x.data(), DType::kFloat32, segments.data(),
                            static_cast<std::int64_t>(segments.size()));
  const std::vector<double> got = emulated_sums(x, segments);
  EXPECT_EQ(bits_of(emulated_sums(x, segments)), bits_of(got)) << "rerun";
  // Alone, a segment gives the same bits (checked for two: each costs 512 blocks).
  for (const std::size_t k : {std::size_t{0}, std::size_t{3}}) {
    EXPECT_EQ(bits_of(emulated_sums(x, {segments[k]})), bits_of(std::vector<double>{got[k]})) << k;
  }
  for (std::size_t k = 0; k < segments.size(); ++k) {
    SCOPED_TRACE(k);
    emulated::report("sums_of_squares segment " + std::to_string(k) + " relative",
                     cpu[k] > 0.0 ? std::abs(got[k] - cpu[k]) / cpu[k] : std::abs(got[k]));
    EXPECT_LE(std::abs(got[k] - cpu[k]), 1e-12 * (cpu[k] > 1.0 ? cpu[k] : 1.0));
  }
}

// The sums over 16-bit weights (the kernel's kS = kBF16/kF16 instance, each element widened as it
// is loaded) are the sums over their fp32 widening, bit for bit: on the emulated device and on the
// host (ops/cpu's 16-bit path), segments at odd offsets included.
template <Storage kS>
void check_16bit_sums() {
  constexpr std::int64_t kN = 9000;
  const GuardedBuffer<typename StorageOf<kS>::Elem> x16(
      to_storage<kS>(emulated::random_floats(static_cast<std::size_t>(kN), 65, -2.0f, 2.0f)));
  const GuardedBuffer<float> x32(to_fp32<kS>(x16.values()));
  const std::vector<ops::SquaresSegment> segments = {
      {0, kN}, {7, 0}, {63, 1}, {101, 513}, {kN - 4099, 4099}};
  const auto count = static_cast<std::int64_t>(segments.size());
  const std::string what = emulated::storage_name(kS);
  EXPECT_EQ(bits_of(emulated_sums<kS>(x16, segments)), bits_of(emulated_sums(x32, segments)))
      << what;
  std::vector<double> host16(segments.size()), host32(segments.size());
  ops::cpu::sums_of_squares(host16.data(), x16.data(), StorageOf<kS>::kDType, segments.data(),
                            count);
  ops::cpu::sums_of_squares(host32.data(), x32.data(), DType::kFloat32, segments.data(), count);
  EXPECT_EQ(bits_of(host16), bits_of(host32)) << what << " on the host";
}

TEST(KernelsEmulatedGradients, SixteenBitSumsOfSquaresEqualThoseOfTheWidenedCopy) {
  check_16bit_sums<Storage::kBF16>();
  check_16bit_sums<Storage::kF16>();
}

}  // namespace
}  // namespace mds
