#include "ops/cpu/gradients.h"

#include <cmath>
#include <type_traits>

#include "ops/cpu/adam.h"

namespace mds::ops::cpu {
namespace {

using tensor::DType;

// `value` rounded to kDtype (fp32: as it is) and widened back.
template <DType kDtype>
float rounded(float value) {
  if constexpr (kDtype == DType::kBFloat16) return tensor::to_float(tensor::to_bfloat16(value));
  if constexpr (kDtype == DType::kFloat16) return tensor::to_float(tensor::to_float16(value));
  return value;
}

// f(std::integral_constant<DType, d>{}) for d = dtype among fp32, bf16 and fp16.
template <typename F>
void with_rounding(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBFloat16:
      return f(std::integral_constant<DType, DType::kBFloat16>{});
    case DType::kFloat16:
      return f(std::integral_constant<DType, DType::kFloat16>{});
    default:
      return f(std::integral_constant<DType, DType::kFloat32>{});
  }
}

// rounded with the dtype known at run time.
float round_to(DType dtype, float value) {
  float out = value;
  with_rounding(dtype, [&](auto d) { out = rounded<decltype(d)::value>(value); });
  return out;
}

template <typename T, typename Op>
void map_elements(T* v, std::int64_t n, Op op) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) v[i] = op(v[i]);
}

template <typename Op>
void map_in_dtype(void* x, DType dtype, std::int64_t n, Op op) {
  switch (dtype) {
    case DType::kBFloat16:
      map_elements(static_cast<tensor::BFloat16*>(x), n, [op](tensor::BFloat16 v) {
        return tensor::to_bfloat16(op(tensor::to_float(v)));
      });
      break;
    case DType::kFloat16:
      map_elements(static_cast<tensor::Float16*>(x), n,
                   [op](tensor::Float16 v) { return tensor::to_float16(op(tensor::to_float(v))); });
      break;
    default:
      map_elements(static_cast<float*>(x), n, op);
      break;
  }
}

// The loop of accumulate_rounded with its choices made outside it.
template <DType kGrad, DType kThrough, bool kFresh>
void accumulate_loop(void* accumulator, DType accumulator_dtype, const float* micro,
                     std::int64_t n) {
  // A fresh accumulator's sum is 0 + g: g, except that −0 gives +0 (spelled out, so that no
  // compiler may drop the addition).
  const auto sum = [micro](float old, std::int64_t i) {
    const float g = rounded<kGrad>(micro[i]);
    return kFresh ? (g == 0.0f ? 0.0f : g) : old + g;
  };
  if (accumulator_dtype == DType::kFloat32) {
    auto* acc = static_cast<float*>(accumulator);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) acc[i] = rounded<kThrough>(sum(kFresh ? 0.0f : acc[i], i));
  } else {
    auto* acc = static_cast<tensor::Float16*>(accumulator);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const tensor::Float16 a =
          tensor::to_float16(sum(kFresh ? 0.0f : tensor::to_float(acc[i]), i));
      if constexpr (kThrough == DType::kFloat32) {
        acc[i] = a;
      } else {
        acc[i] = tensor::to_float16(rounded<kThrough>(tensor::to_float(a)));
      }
    }
  }
}

}  // namespace

void accumulate_rounded(void* accumulator, DType accumulator_dtype, const float* micro,
                        std::int64_t n, DType grad_dtype, bool fresh, DType round_through) {
  with_rounding(grad_dtype, [&](auto grad) {
    with_rounding(round_through, [&](auto through) {
      if (fresh) {
        accumulate_loop<decltype(grad)::value, decltype(through)::value, true>(
            accumulator, accumulator_dtype, micro, n);
      } else {
        accumulate_loop<decltype(grad)::value, decltype(through)::value, false>(
            accumulator, accumulator_dtype, micro, n);
      }
    });
  });
}

void round_through(void* x, DType x_dtype, std::int64_t n, DType dtype) {
  if (x_dtype == DType::kFloat32) {
    auto* v = static_cast<float*>(x);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) v[i] = round_to(dtype, v[i]);
  } else {
    auto* v = static_cast<tensor::Float16*>(x);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      v[i] = tensor::to_float16(round_to(dtype, tensor::to_float(v[i])));
  }
}

void scale_in_dtype(void* x, DType x_dtype, std::int64_t n, float operand, bool divide) {
  if (divide) {
    map_in_dtype(x, x_dtype, n, [operand](float v) { return v / operand; });
  } else {
    map_in_dtype(x, x_dtype, n, [operand](float v) { return v * operand; });
  }
}

bool has_inf_or_nan(const void* x, DType dtype, std::int64_t n) {
  bool found = false;
  switch (dtype) {
    case DType::kFloat16: {
      const auto* v = static_cast<const tensor::Float16*>(x);
#pragma omp parallel for schedule(static) reduction(|| : found)
      for (std::int64_t i = 0; i < n; ++i) found = found || (v[i].bits & 0x7C00u) == 0x7C00u;
      break;
    }
    case DType::kBFloat16: {
      const auto* v = static_cast<const tensor::BFloat16*>(x);
#pragma omp parallel for schedule(static) reduction(|| : found)
      for (std::int64_t i = 0; i < n; ++i) found = found || (v[i].bits & 0x7F80u) == 0x7F80u;
      break;
    }
    default: {
      const auto* v = static_cast<const float*>(x);
#pragma omp parallel for schedule(static) reduction(|| : found)
      for (std::int64_t i = 0; i < n; ++i) found = found || !std::isfinite(v[i]);
      break;
    }
  }
  return found;
}

void sums_of_squares(double* out, const void* x, DType dtype, const SquaresSegment* segments,
                     std::int64_t count) {
  const auto* bytes = static_cast<const unsigned char*>(x);
  const auto element = static_cast<std::int64_t>(tensor::dtype_size(dtype));
  for (std::int64_t k = 0; k < count; ++k) {
    out[k] = sum_of_squares(bytes + segments[k].offset * element, dtype, segments[k].numel);
  }
}

}  // namespace mds::ops::cpu
