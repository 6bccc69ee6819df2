// The dtype rule of the ops with 16-bit activation variants (elementwise add/scale, LayerNorm,
// GeLU, dropout, embedding, the cross entropy's logits): activations are float32, bfloat16 or
// float16, all of one dtype per call; parameter gradients and statistics (the cross entropy's
// per-token values too) stay float32; the parameters themselves (LayerNorm weight and bias, the
// biases of bias-GeLU and bias-dropout-add, embedding tables) are float32 or the activations'
// dtype, one dtype per call (a 16-bit model keeps every parameter in its 16-bit type, as
// upstream). A 16-bit call computes in fp32 (loads widened exactly, each output rounded once on
// store), on the host and on a device, so 16-bit parameters give exactly what their fp32 widening
// gives.
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

// The dtype of the parameter `first`, which must be float32 or `activation`'s dtype; every other
// given parameter of the call must share it. One line naming the op and the tensor otherwise.
inline tensor::DType parameter_dtype(const char* op, Arg activation, Arg first,
                                     std::initializer_list<Arg> others) {
  const tensor::DType dtype = first.tensor.dtype();
  const tensor::DType allowed = activation.tensor.dtype();
  if (dtype != tensor::DType::kFloat32 && dtype != allowed) {
    if (allowed == tensor::DType::kFloat32) {
      base::fail("ops::", op, ": ", first.name, " must be float32, got ",
                 tensor::dtype_name(dtype));
    }
    base::fail("ops::", op, ": ", first.name, " must be float32 or ", activation.name, "'s dtype ",
               tensor::dtype_name(allowed), ", got ", tensor::dtype_name(dtype));
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
