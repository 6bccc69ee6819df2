#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace mds::tensor {

// Element types of tensors, and of the storages in PyTorch checkpoint files. Floating types are the
// training precisions; integer types carry token ids, positions and masks.
enum class DType : std::uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt16,
  kUInt8,
  kBool
};

std::size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // PyTorch's spelling: "float32", "bfloat16", ...
bool is_floating(DType dtype);

// 16-bit floating formats, stored as raw bits. Conversions from float round to nearest, ties to
// even, as PyTorch's casts do; NaN stays NaN (quiet) and overflow becomes infinity.
struct BFloat16 {
  std::uint16_t bits = 0;
};
struct Float16 {
  std::uint16_t bits = 0;
};

inline float bits_to_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline std::uint32_t float_to_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// The identity, so code templated over float, BFloat16 and Float16 widens with one call.
inline float to_float(float value) {
  return value;
}

inline float to_float(BFloat16 value) {
  return bits_to_float(std::uint32_t{value.bits} << 16);
}

inline BFloat16 to_bfloat16(float value) {
  const std::uint32_t bits = float_to_bits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return {static_cast<std::uint16_t>((bits >> 16) | 0x40)};
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return {static_cast<std::uint16_t>((bits + rounding) >> 16)};
}

float to_float(Float16 value);
Float16 to_float16(float value);

}  // namespace mds::tensor
