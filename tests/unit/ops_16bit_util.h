// Helpers for the 16-bit activation tests: inputs drawn in fp32 and rounded to bf16/fp16 (so that
// the widened copy holds exactly the 16-bit values), and the check that a 16-bit output is the
// fp32 reference rounded once.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ops_test_util.h"
#include "tensor/tensor.h"

namespace mds::ops_test {

template <typename T>
T narrow(float value) {
  if constexpr (std::is_same_v<T, tensor::BFloat16>) {
    return tensor::to_bfloat16(value);
  } else {
    return tensor::to_float16(value);
  }
}

// One activation tensor in a 16-bit type and its exact fp32 widening.
template <typename T>
struct Half {
  std::vector<T> low;
  std::vector<float> wide;

  Half(std::size_t n, std::uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
    for (const float x : random_floats(n, seed, lo, hi)) {
      low.push_back(narrow<T>(x));
      wide.push_back(tensor::to_float(low.back()));
    }
  }
  // After an op updated low and wide differently (an accumulated output): wide = low widened.
  void sync() {
    for (std::size_t i = 0; i < low.size(); ++i) wide[i] = tensor::to_float(low[i]);
  }
  tensor::Tensor t(tensor::Shape shape) { return view(low, shape); }
  tensor::Tensor f(tensor::Shape shape) { return view(wide, shape); }
};

// got[i] must be want[i] (an fp32 result) rounded once to T, bit for bit.
template <typename T>
void expect_rounded(const std::vector<T>& got, const std::vector<float>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].bits, narrow<T>(want[i]).bits)
        << what << " at " << i << ": fp32 reference " << want[i] << ", got "
        << tensor::to_float(got[i]);
  }
}

}  // namespace mds::ops_test
