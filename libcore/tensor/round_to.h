// A float rounded to a 16-bit storage type chosen by a template parameter, for code generic over
// BFloat16 and Float16.
#pragma once
#include "tensor/dtype.h"

namespace mds::tensor {

template <typename T>
T round_to(float value);

template <>
inline BFloat16 round_to<BFloat16>(float value) {
  return to_bfloat16(value);
}

template <>
inline Float16 round_to<Float16>(float value) {
  return to_float16(value);
}

}  // namespace mds::tensor
