// Helpers shared by the ops_*_test.cpp files: host tensors over std::vector, seeded random
// inputs and central finite differences to check a backward against its forward.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mds::ops_test {

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

template <typename T>
tensor::Tensor view(std::vector<T>& v, tensor::Shape shape) {
  EXPECT_EQ(static_cast<std::size_t>(shape.numel()), v.size());
  return {v.data(), tensor::dtype_of<T>(), shape};
}

// Σ w·out in double: the scalar whose gradient w.r.t. out is w, so backward(dout = w) must
// produce its gradients w.r.t. the inputs.
inline double weighted_sum(const std::vector<float>& out, const std::vector<float>& w) {
  double s = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * w[i];
  return s;
}

// d loss / d x[i] by central differences, x perturbed in place and restored.
inline std::vector<double> numeric_grad(std::vector<float>& x, const std::function<double()>& loss,
                                        float eps = 1e-2f) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + eps;
    const double up = loss();
    x[i] = saved - eps;
    const double down = loss();
    x[i] = saved;
    g[i] = (up - down) / (2.0 * static_cast<double>(eps));
  }
  return g;
}

inline void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                         double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " at " << i;
  }
}

inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double atol,
                         double rtol, const std::string& what) {
  expect_close(got, std::vector<double>(want.begin(), want.end()), atol, rtol, what);
}

}  // namespace mds::ops_test
