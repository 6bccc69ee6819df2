// The elementwise kernels' device code (kernels/elementwise_kernels.cuh) run on the CPU under the
// SIMT emulation with the launch shapes kernels/elementwise.cu uses, against their CPU twins
// (ops/cpu/elementwise): add, scale and fill in fp32, bf16 and fp16, every cast between them, bit
// for bit (tests/gpu/elementwise_test.cpp's bound; a 16-bit add or scale is the fp32 one on the
// widened inputs, rounded once). Outputs start poisoned, buffers have poisoned guards, every kernel
// runs twice with the same bits. Sizes straddle the 256-thread block; the grid-stride loop's wrap
// (past 2^24 elements on a device) runs on a narrowed grid.
// First the emulation (CUDA keywords, device_common.cuh's host twins), then the kernels.
#include "tests/unit/emulated_device_common.h"

#include "kernels/elementwise_kernels.cuh"
#include "ops/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/cpu/elementwise.h"
#include "tests/unit/emulated_compare.h"
#include "tests/unit/guarded_buffer.h"

namespace mds {
namespace {

namespace ek = kernels::elementwise_detail;
using emulated::bits_of;
using emulated::GuardedBuffer;
using emulated::StorageOf;
using kernels::detail::Storage;

constexpr std::int64_t kSizes[] = {1, 3, 255, 256, 257, 1000, 4099};

// Runs `kernel_call(out)` twice on a poisoned, guarded output of n elements; expects the same bits
// both times and untouched guards, and returns the output.
template <typename T, typename Call>
std::vector<T> run_twice(std::size_t n, const kernels::detail::LaunchShape& shape,
                         Call kernel_call) {
  GuardedBuffer<T> out(n);
  emulated::launch(shape, [&] { kernel_call(out.data()); });
  const std::vector<T> first = out.values();
  out.poison();
  emulated::launch(shape, [&] { kernel_call(out.data()); });
  EXPECT_EQ(bits_of(out.values()), bits_of(first)) << "a rerun changed the bits";
  EXPECT_EQ(out.guard_bytes_written(), 0u);
  return first;
}

TEST(KernelsEmulatedElementwise, AddScaleFillAreBitIdenticalToCpu) {
  emulated::for_each_storage([](auto s) {
    constexpr Storage kS = decltype(s)::value;
    using S = StorageOf<kS>;
    using T = typename S::Elem;
    for (const std::int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << emulated::storage_name(kS) << " n=" << n);
      const auto un = static_cast<std::size_t>(n);
      const GuardedBuffer<T> a(emulated::to_storage<kS>(emulated::random_floats(un, 1)));
      const GuardedBuffer<T> b(emulated::to_storage<kS>(emulated::random_floats(un, 2)));
      const std::vector<float> wa = emulated::to_fp32<kS>(a.values());
      const std::vector<float> wb = emulated::to_fp32<kS>(b.values());
      const auto shape = ek::launch_shape(n);

      std::vector<float> sum(un), scaled(un);
      ops::cpu::add(sum.data(), wa.data(), wb.data(), n);
      ops::cpu::scale(scaled.data(), wa.data(), 0.37f, n);
      const auto got_sum =
          run_twice<T>(un, shape, [&](T* out) { ek::add_kernel<kS>(out, a.data(), b.data(), n); });
      EXPECT_EQ(bits_of(got_sum), bits_of(emulated::to_storage<kS>(sum)));
      const auto got_scaled =
          run_twice<T>(un, shape, [&](T* out) { ek::scale_kernel<kS>(out, a.data(), 0.37f, n); });
      EXPECT_EQ(bits_of(got_scaled), bits_of(emulated::to_storage<kS>(scaled)));

      // 0.1 is inexact in every storage: fill16's host-rounded pattern must be the CPU's.
      std::vector<T> filled(un);
      ops::cpu::fill(filled.data(), S::kDType, 0.1f, n);
      const auto got_fill = run_twice<T>(un, shape, [&](T* out) {
        if constexpr (kS == Storage::kF32) {
          ek::fill_kernel(out, 0.1f, n);
        } else {
          ek::fill16_kernel(reinterpret_cast<std::uint16_t*>(out), ek::bits16(0.1f, kS), n);
        }
      });
      EXPECT_EQ(bits_of(got_fill), bits_of(filled));
    }
  });
}

// Values across fp16's normal and subnormal range, bf16/fp16 ties, overflow to inf, infinities
// and signed zeros, in the input storage.
template <Storage kIn>
std::vector<typename StorageOf<kIn>::Elem> cast_inputs(std::size_t n) {
  std::vector<float> v = emulated::random_floats(n, 3, -70000.0f, 70000.0f);
  const std::vector<float> small = emulated::random_floats(n, 4, -1e-6f, 1e-6f);
  const float specials[] = {0.0f,     -0.0f,           INFINITY,       -INFINITY, 65504.0f,
                            65520.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-8f, 6e-8f,     3e-8f};
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 3 == 1) v[i] = small[i];
    if (i % 7 == 2) v[i] = specials[(i / 7) % std::size(specials)];
  }
  return emulated::to_storage<kIn>(v);
}

TEST(KernelsEmulatedElementwise, EveryCastIsBitIdenticalToCpu) {
  emulated::for_each_storage([](auto out_s) {
    emulated::for_each_storage([](auto in_s) {
      constexpr Storage kOut = decltype(out_s)::value, kIn = decltype(in_s)::value;
      if constexpr (kOut != kIn) {  // equal storages are a copy, not a kernel
        using TOut = typename StorageOf<kOut>::Elem;
        for (const std::int64_t n : kSizes) {
          SCOPED_TRACE(testing::Message() << emulated::storage_name(kIn) << " -> "
                                          << emulated::storage_name(kOut) << " n=" << n);
          const auto un = static_cast<std::size_t>(n);
          const GuardedBuffer<typename StorageOf<kIn>::Elem> x(cast_inputs<kIn>(un));
          std::vector<TOut> want(un);
          ops::cpu::cast(want.data(), StorageOf<kOut>::kDType, x.data(), StorageOf<kIn>::kDType, n);
          const auto got = run_twice<TOut>(un, ek::launch_shape(n), [&](TOut* out) {
            ek::cast_kernel<kOut, kIn>(out, x.data(), n);
          });
          EXPECT_EQ(bits_of(got), bits_of(want));
        }
      }
    });
  });
}

TEST(KernelsEmulatedElementwise, GridStrideLoopWrapsOnANarrowGrid) {
  const std::int64_t n = 4099;  // 17 blocks' worth on 2 blocks: each thread takes 8 or 9
  const auto un = static_cast<std::size_t>(n);
  const GuardedBuffer<float> a(emulated::random_floats(un, 5)), b(emulated::random_floats(un, 6));
  std::vector<float> want(un);
  ops::cpu::add(want.data(), a.data(), b.data(), n);
  GuardedBuffer<float> out(un);
  emulated::launch_narrowed(ek::launch_shape(n), 2, [&] {
    ek::add_kernel<Storage::kF32>(out.data(), a.data(), b.data(), n);
  });
  EXPECT_EQ(bits_of(out.values()), bits_of(want));
  EXPECT_EQ(out.guard_bytes_written(), 0u);
}

// Pieces of a gather (scattered inputs to one contiguous run, as ZeRO's partitions take the
// parameters' gradients) and of a scatter (the way back), with empty pieces, one-element pieces
// and pieces straddling warps' 256-element runs and blocks.
struct PiecesCase {
  const char* name;
  std::vector<ops::CastPiece> pieces;
  std::size_t out_numel, in_numel;
};

std::vector<PiecesCase> pieces_cases() {
  std::vector<ops::CastPiece> gather, scatter;
  std::int64_t contiguous = 0, scattered = 3;
  for (const std::int64_t numel : {768, 1, 0, 2304, 255, 257, 3, 0, 4099, 17}) {
    gather.push_back({contiguous, scattered, numel});
    scatter.push_back({scattered, contiguous, numel});
    contiguous += numel;
    scattered += numel + 5;  // a gap the scatter leaves untouched
  }
  const auto c = static_cast<std::size_t>(contiguous), s = static_cast<std::size_t>(scattered);
  return {{"gather", gather, c, s}, {"scatter", scatter, s, c}, {"one piece", {{0, 0, 9}}, 9, 9}};
}

// cast_pieces_kernel over every storage pair, plain and times a factor: the bits of one CPU cast
// per piece (widened, multiplied in fp32 and rounded once with the factor), every element
// outside the pieces left poisoned, reruns alike; and on a grid narrowed to one block.
TEST(KernelsEmulatedElementwise, CastPiecesIsOneCpuCastAPiece) {
  emulated::for_each_storage([](auto out_s) {
    emulated::for_each_storage([](auto in_s) {
      constexpr Storage kOut = decltype(out_s)::value, kIn = decltype(in_s)::value;
      using TOut = typename StorageOf<kOut>::Elem;
      constexpr tensor::DType kOutType = StorageOf<kOut>::kDType, kInType = StorageOf<kIn>::kDType;
      for (const PiecesCase& c : pieces_cases()) {
        for (const float factor : {1.0f, 0.37f}) {
          SCOPED_TRACE(testing::Message()
                       << emulated::storage_name(kIn) << " -> " << emulated::storage_name(kOut)
                       << " " << c.name << " factor " << factor);
          const GuardedBuffer<typename StorageOf<kIn>::Elem> x(cast_inputs<kIn>(c.in_numel));
          GuardedBuffer<TOut> expected(c.out_numel);  // poisoned as run_twice's output
          std::vector<TOut> want = expected.values();
          std::vector<ek::PieceStart> starts;
          std::int64_t total = 0;
          for (const ops::CastPiece& piece : c.pieces) {
            std::vector<float> wide(static_cast<std::size_t>(piece.numel));
            ops::cpu::cast(wide.data(), tensor::DType::kFloat32, x.data() + piece.in, kInType,
                           piece.numel);
            if (factor != 1.0f) ops::cpu::scale(wide.data(), wide.data(), factor, piece.numel);
            ops::cpu::cast(want.data() + piece.out, kOutType, wide.data(), tensor::DType::kFloat32,
                           piece.numel);
            starts.push_back({total, piece.out, piece.in});
            total += piece.numel;
          }
          const auto count = static_cast<std::int64_t>(starts.size());
          starts.push_back({total, 0, 0});
          const auto call = [&](TOut* out) {
            ek::cast_pieces_kernel<kOut, kIn>(out, x.data(), starts.data(), count, factor);
          };
          const auto got = run_twice<TOut>(c.out_numel, ek::pieces_launch_shape(total), call);
          EXPECT_EQ(bits_of(got), bits_of(want));
          GuardedBuffer<TOut> narrow(c.out_numel);
          emulated::launch_narrowed(ek::pieces_launch_shape(total), 1,
                                    [&] { call(narrow.data()); });
          EXPECT_EQ(bits_of(narrow.values()), bits_of(want)) << "one block";
          EXPECT_EQ(narrow.guard_bytes_written(), 0u);
        }
      }
    });
  });
}

}  // namespace
}  // namespace mds
