#include <cpuid.h>
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "base/error.h"
#include "tensor/arena.h"
#include "tensor/buffer.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace mds::tensor {
namespace {

TEST(TensorDType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::kFloat32), 4u);
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_EQ(dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_TRUE(is_floating(DType::kFloat16));
  EXPECT_FALSE(is_floating(DType::kInt32));
}

// The processor's F16C conversions (round to nearest even) are the reference for ours.
__attribute__((target("f16c"))) std::uint16_t hardware_half(float value) {
  const __m128i half = _mm_cvtps_ph(_mm_set_ss(value), _MM_FROUND_TO_NEAREST_INT);
  return static_cast<std::uint16_t>(_mm_extract_epi16(half, 0));
}
__attribute__((target("f16c"))) float hardware_float(std::uint16_t bits) {
  return _cvtsh_ss(bits);
}

bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

TEST(Float16, MatchesHardwareConversionOnAStrideOfAllFloats) {
  ASSERT_TRUE(cpu_has_f16c()) << "this test needs an x86-64 CPU with F16C";
  for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 9973) {
    const float value = bits_to_float(static_cast<std::uint32_t>(bits));
    const std::uint16_t reference_bits = hardware_half(value);
    const std::uint16_t ours = to_float16(value).bits;
    if (std::isnan(value)) {
      EXPECT_EQ(ours & 0x7C00, 0x7C00);
      EXPECT_NE(ours & 0x3FF, 0) << std::hex << bits;
    } else {
      ASSERT_EQ(ours, reference_bits) << "float bits 0x" << std::hex << bits;
    }
  }
}

TEST(Float16, EveryHalfRoundTripsThroughFloat) {
  ASSERT_TRUE(cpu_has_f16c()) << "this test needs an x86-64 CPU with F16C";
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const Float16 half{static_cast<std::uint16_t>(bits)};
    const float value = to_float(half);
    const float reference = hardware_float(static_cast<std::uint16_t>(bits));
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(reference));
      continue;
    }
    ASSERT_EQ(value, reference) << std::hex << bits;
    ASSERT_EQ(to_float16(value).bits, bits) << std::hex << bits;
  }
}

TEST(Float16, EdgeValues) {
  EXPECT_EQ(to_float16(65504.0f).bits, 0x7BFF);       // largest half
  EXPECT_EQ(to_float16(65519.0f).bits, 0x7BFF);       // below the halfway point to 65536
  EXPECT_EQ(to_float16(65520.0f).bits, 0x7C00);       // halfway: ties to even = infinity
  EXPECT_EQ(to_float16(5.9604645e-8f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(to_float16(2.9802322e-8f).bits, 0x0000);  // exactly half of it: ties to even
  EXPECT_EQ(to_float16(-0.0f).bits, 0x8000);
  EXPECT_EQ(to_float(Float16{0x3C00}), 1.0f);
  EXPECT_EQ(to_float(Float16{0xC000}), -2.0f);
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(to_float(BFloat16{0x3F80}), 1.0f);
  // 257 lies halfway between the bf16 neighbours 256 and 258: ties to even gives 256; 259 -> 260.
  EXPECT_EQ(to_float(to_bfloat16(257.0f)), 256.0f);
  EXPECT_EQ(to_float(to_bfloat16(259.0f)), 260.0f);
  EXPECT_EQ(to_bfloat16(bits_to_float(0x3F808000)).bits, 0x3F80);          // tie, even stays
  EXPECT_EQ(to_bfloat16(bits_to_float(0x3F818000)).bits, 0x3F82);          // tie, odd rounds up
  EXPECT_EQ(to_bfloat16(bits_to_float(0x3F808001)).bits, 0x3F81);          // above the tie
  EXPECT_EQ(to_bfloat16(std::numeric_limits<float>::max()).bits, 0x7F80);  // overflow: inf
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(bits_to_float(0x7F800001)))));  // NaN stays NaN
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const BFloat16 value{static_cast<std::uint16_t>(bits)};
    if (std::isnan(to_float(value))) continue;
    ASSERT_EQ(to_bfloat16(to_float(value)).bits, bits);
  }
}

TEST(Tensor, ViewsShareMemory) {
  Buffer buffer(6 * sizeof(float), Device{});
  Tensor t = buffer.as(DType::kFloat32, {2, 3});
  for (int i = 0; i < 6; ++i) t.data<float>()[i] = static_cast<float>(i);
  const Tensor row = t.narrow(1, 1);
  EXPECT_EQ(row.shape(), Shape({1, 3}));
  EXPECT_EQ(row.host_span<float>()[0], 3.0f);
  EXPECT_EQ(t.reshape({3, 2}).data<float>(), t.data<float>());
  EXPECT_THROW(t.reshape({4, 2}), base::Error);
  EXPECT_THROW(t.narrow(1, 2), base::Error);
  EXPECT_THROW(t.data<std::int32_t>(), base::Error);
  EXPECT_THROW(buffer.as(DType::kFloat32, {7}), base::Error);
}

TEST(Arena, LaysOutAlignedSlotsInOneBlock) {
  ArenaPlan plan;
  const std::size_t a = plan.add("a", DType::kFloat32, {3});
  const std::size_t b = plan.add("b", DType::kBFloat16, {5, 7});
  EXPECT_EQ(plan.slots()[b].offset, 64u);
  EXPECT_EQ(plan.total_bytes(), 64u + 70u);
  const Arena arena(plan, Device{}, "activations");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(arena[a].raw()) % 64, 0u);
  EXPECT_EQ(static_cast<char*>(arena[b].raw()) - static_cast<char*>(arena[a].raw()), 64);
  EXPECT_EQ(arena[b].shape(), Shape({5, 7}));
}

TEST(Arena, TooLargeFailsWithTheBytesNeeded) {
  ArenaPlan plan;
  plan.add("huge", DType::kFloat32, {std::int64_t{1} << 45});
  try {
    Arena arena(plan, Device{}, "activations");
    FAIL() << "expected an allocation failure";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("activations: cannot allocate 140737488355328 bytes"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mds::tensor
