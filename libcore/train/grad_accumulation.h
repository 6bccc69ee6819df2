// Gradient accumulation with the rounding of upstream's gradient dtypes (training.md §3.6, §4.4,
// §4.5). The model computes a micro-batch's gradient in fp32; these passes apply the roundings
// upstream's GPU run performs when that gradient is produced in bf16/fp16 and added up. The
// overloads with a DeviceContext run on its device (ops/gradients.h, bit-identical to the host).
#pragma once

#include "ops/device_context.h"
#include "ops/gradients.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace mds::train {

// accumulator[i] = A(accumulator[i] + G(micro[i])) where G rounds to `grad_dtype` (the dtype the
// model's backward produces) and A to the accumulator's dtype (fp32 or fp16), both round to
// nearest even. bf16: `hp_grad += lp.grad.float()` (BF16_Optimizer); fp16: `.grad += g` in fp16;
// fp32: plain add. `micro` is fp32 with the accumulator's element count. `steps` folds in the
// zero fill before (a fresh accumulator) and the round trip after (ops::AccumulateSteps).
void accumulate_gradient(tensor::Tensor accumulator, tensor::Tensor micro,
                         tensor::DType grad_dtype);
// The same on ctx's device.
void accumulate_gradient(const ops::DeviceContext& ctx, tensor::Tensor accumulator,
                         tensor::Tensor micro, tensor::DType grad_dtype,
                         ops::AccumulateSteps steps = {});

// Every element of `grads` (fp32 or fp16) rounded to `dtype` and back: what an all-reduce in the
// communication dtype does to the gradients when the data-parallel group has one rank. Nothing
// to do (on any device) when `dtype` is fp32 or the gradients' own.
void round_through(tensor::Tensor grads, tensor::DType dtype);
void round_through(const ops::DeviceContext& ctx, tensor::Tensor grads, tensor::DType dtype);

// x = x · factor (mul_ by a Python float: the factor as fp32, the product in fp32, rounded to x's
// dtype), and x = x / divisor (div_ by an int, the quotient in fp32). x is fp32, bf16 or fp16:
// the DP averaging of gradients in their communication dtype (post- and pre-scaling, training.md
// §4.4, §4.5). With a context on its device (ops::scale_in_dtype, bit-identical to the host).
void scale_in_dtype(tensor::Tensor x, double factor);
void scale_in_dtype(const ops::DeviceContext& ctx, tensor::Tensor x, double factor);
void divide_in_dtype(tensor::Tensor x, double divisor);
void divide_in_dtype(const ops::DeviceContext& ctx, tensor::Tensor x, double divisor);

// Whether any element of `x` (fp32, bf16 or fp16) is inf or NaN.
bool has_inf_or_nan(tensor::Tensor x);
// The same on ctx's device: one kernel and one wait.
bool has_inf_or_nan(const ops::DeviceContext& ctx, tensor::Tensor x);

}  // namespace mds::train
