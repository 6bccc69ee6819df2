#include "ops/cpu/elementwise.h"

#include <cstring>

namespace mds::ops::cpu {

using tensor::BFloat16;
using tensor::DType;
using tensor::Float16;

namespace {

float load(const void* p, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::kBFloat16:
      return tensor::to_float(static_cast<const BFloat16*>(p)[i]);
    case DType::kFloat16:
      return tensor::to_float(static_cast<const Float16*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

void store(void* p, DType dtype, std::int64_t i, float value) {
  switch (dtype) {
    case DType::kBFloat16:
      static_cast<BFloat16*>(p)[i] = tensor::to_bfloat16(value);
      break;
    case DType::kFloat16:
      static_cast<Float16*>(p)[i] = tensor::to_float16(value);
      break;
    default:
      static_cast<float*>(p)[i] = value;
  }
}

}  // namespace

void add(float* out, const float* a, const float* b, std::int64_t n) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void scale(float* out, const float* x, float factor, std::int64_t n) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * factor;
}

void fill(void* out, DType dtype, float value, std::int64_t n) {
  if (dtype == DType::kFloat32) {
    // The common case (gradients, workspaces) as a plain store loop the compiler vectorizes.
    float* y = static_cast<float*>(out);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) y[i] = value;
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) store(out, dtype, i, value);
}

void cast(void* out, DType out_dtype, const void* x, DType x_dtype, std::int64_t n) {
  if (n <= 0) return;  // an empty vector's data() may be null, which memmove must not see
  if (out_dtype == x_dtype) {
    // memmove: a same-dtype cast onto itself is allowed.
    std::memmove(out, x, static_cast<std::size_t>(n) * tensor::dtype_size(x_dtype));
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) store(out, out_dtype, i, load(x, x_dtype, i));
}

}  // namespace mds::ops::cpu
