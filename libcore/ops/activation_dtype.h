// The dtype rule of the ops with 16-bit activation variants (elementwise add/scale, LayerNorm,
// GeLU, dropout, embedding, the cross entropy's logits): activations are float32, bfloat16 or
// float16, all of one dtype per call; parameters, their gradients and statistics (the cross
// entropy's per-token values too) stay float32. A 16-bit call computes in fp32
// (loads widened exactly, each output rounded once on store), on the host and on a device.
#pragma once
#include <initializer_list>

#include "base/error.h"
#include "ops/check.h"
#include "tensor/tensor.h"

namespace mds::ops::detail {

// The dtype of `first`, which must be float32, bfloat16 or float16; every other given activation
// argument must share it. One line naming the op and the tensor otherwise.
inline tensor::DType activation_dtype(const char* op, Arg first,
                                      std::initializer_list<Arg> others) {
  const tensor::DType dtype = first.tensor.dtype();
  if (dtype != tensor::DType::kFloat32 && dtype != tensor::DType::kBFloat16 &&
      dtype != tensor::DType::kFloat16) {
    base::fail("ops::", op, ": ", first.name, " must be float32, bfloat16 or float16, got ",
               tensor::dtype_name(dtype));
  }
  for (const Arg& arg : others) {
    if (given(arg.tensor) && arg.tensor.dtype() != dtype) {
      base::fail("ops::", op, ": ", arg.name, " must have ", first.name, "'s dtype ",
                 tensor::dtype_name(dtype), ", got ", tensor::dtype_name(arg.tensor.dtype()));
    }
  }
  return dtype;
}

}  // namespace mds::ops::detail
