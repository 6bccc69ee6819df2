#include "tensor/dtype.h"

namespace mds::tensor {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat64:
      return "float64";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kInt16:
      return "int16";
    case DType::kInt8:
      return "int8";
    case DType::kUInt16:
      return "uint16";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
  }
  return "unknown";
}

bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
         dtype == DType::kFloat64;
}

float to_float(Float16 value) {
  const std::uint32_t sign = std::uint32_t{value.bits & 0x8000u} << 16;
  const std::uint32_t exponent = (value.bits >> 10) & 0x1Fu;
  std::uint32_t mantissa = value.bits & 0x3FFu;
  if (exponent == 0x1F) return bits_to_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) return bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_to_float(sign);
  // Subnormal: shift the mantissa up until its leading one reaches the implicit-bit position.
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  return bits_to_float(sign | static_cast<std::uint32_t>(113 - shift) << 23 |
                       ((mantissa & 0x3FFu) << 13));
}

Float16 to_float16(float value) {
  const std::uint32_t bits = float_to_bits(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {  // NaN: keep it quiet and keep the top mantissa bits
    return {static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu))};
  }
  if (magnitude >= 0x477FF000u)
    return {static_cast<std::uint16_t>(sign | 0x7C00u)};  // rounds to inf
  if (magnitude >= 0x38800000u) {  // normal half: rebias the exponent and round the mantissa
    const std::uint32_t rebased = magnitude - (112u << 23);
    const std::uint32_t rounding = 0xFFFu + ((rebased >> 13) & 1u);
    return {static_cast<std::uint16_t>(sign | ((rebased + rounding) >> 13))};
  }
  if (magnitude < 0x33000000u) return {sign};  // below half the smallest subnormal: zero
  // Subnormal half: the value is mantissa_with_implicit_bit >> shift, rounded to nearest even.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126 - exponent;  // value / 2^-24 = mantissa * 2^(exponent - 126)
  const std::uint32_t halfway = 1u << (shift - 1);
  const std::uint32_t remainder = mantissa & ((1u << shift) - 1);
  std::uint32_t result = mantissa >> shift;
  if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
  return {static_cast<std::uint16_t>(sign | result)};
}

}  // namespace mds::tensor
