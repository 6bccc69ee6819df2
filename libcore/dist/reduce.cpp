#include "dist/reduce.h"

#include "base/error.h"

namespace mds::dist {
namespace {

template <typename T>
T combine(ReduceOp op, T a, T b) {
  if (op == ReduceOp::kSum) return a + b;
  return (b > a || b != b) ? b : a;  // b != b: NaN wins
}

template <typename T>
void reduce_native(ReduceOp op, void* acc, const void* src, std::int64_t count) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(src);
  if (op == ReduceOp::kSum) {
    for (std::int64_t i = 0; i < count; ++i) a[i] = a[i] + b[i];
  } else {
    for (std::int64_t i = 0; i < count; ++i) a[i] = combine(op, a[i], b[i]);
  }
}

template <typename T, typename FromFloat>
void reduce_half(ReduceOp op, void* acc, const void* src, std::int64_t count,
                 FromFloat from_float) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(src);
  for (std::int64_t i = 0; i < count; ++i) {
    a[i] = from_float(combine(op, tensor::to_float(a[i]), tensor::to_float(b[i])));
  }
}

}  // namespace

void reduce_into(tensor::DType dtype, ReduceOp op, void* acc, const void* src, std::int64_t count) {
  using tensor::DType;
  switch (dtype) {
    case DType::kFloat32:
      return reduce_native<float>(op, acc, src, count);
    case DType::kFloat64:
      return reduce_native<double>(op, acc, src, count);
    case DType::kInt64:
      return reduce_native<std::int64_t>(op, acc, src, count);
    case DType::kInt32:
      return reduce_native<std::int32_t>(op, acc, src, count);
    case DType::kBFloat16:
      return reduce_half<tensor::BFloat16>(op, acc, src, count,
                                           [](float v) { return tensor::to_bfloat16(v); });
    case DType::kFloat16:
      return reduce_half<tensor::Float16>(op, acc, src, count,
                                          [](float v) { return tensor::to_float16(v); });
    default:
      base::fail("dist: cannot reduce dtype ", tensor::dtype_name(dtype));
  }
}

}  // namespace mds::dist
