// The gradient passes of the mixed-precision optimizer (training.md §3.6, §4.4, §4.5, §5.3) over
// flat buffers: adding a micro-batch's fp32 gradient with the roundings of upstream's 16-bit
// gradients, the round trip through the communication dtype, the overflow check and the
// per-parameter sums of squares of the gradient norm. Each op takes the DeviceContext it runs with
// (ops/device_context.h); on a device the results are bit-identical to the host's.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ops/device_context.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace mds::ops {

// What accumulate_rounded does around its sum, so that the passes before and after it need not
// run on their own.
struct AccumulateSteps {
  // The accumulator holds no gradient yet: it is written as if it held zeros (a −0 sum gives +0)
  // and never read, instead of being zero-filled first.
  bool fresh = false;
  // Each result then goes through this dtype and back, as round_through does (fp32: no rounding).
  tensor::DType round_through = tensor::DType::kFloat32;
};

// accumulator[i] = A(accumulator[i] + G(micro[i])) where G rounds to `grad_dtype` (fp32, bf16 or
// fp16: the dtype upstream's backward produces) and A to the accumulator's dtype (fp32 or fp16),
// both round to nearest even. `micro` is fp32 with the accumulator's element count.
void accumulate_rounded(const DeviceContext& ctx, tensor::Tensor accumulator, tensor::Tensor micro,
                        tensor::DType grad_dtype, AccumulateSteps steps = {});

// Every element of `x` (fp32 or fp16) rounded to `dtype` (fp32, bf16 or fp16) and back.
void round_through(const DeviceContext& ctx, tensor::Tensor x, tensor::DType dtype);

// x[i] = R(x[i] · factor) and x[i] = R(x[i] / divisor): the product or quotient of x's value and
// the fp32 operand taken in fp32, R rounding to x's dtype (fp32, bf16 or fp16; nearest even).
// Torch's `mul_`/`div_` of a 16-bit tensor by a Python number: the data-parallel averaging of
// gradients in their communication dtype (training.md §4.4, §4.5).
void scale_in_dtype(const DeviceContext& ctx, tensor::Tensor x, float factor);
void divide_in_dtype(const DeviceContext& ctx, tensor::Tensor x, float divisor);

// Whether any element of `x` (fp32, bf16 or fp16) is inf or NaN. On a device: one kernel and one
// wait for its flag.
bool has_inf_or_nan(const DeviceContext& ctx, tensor::Tensor x);

// Elements [offset, offset + numel) of a flat buffer.
struct SquaresSegment {
  std::int64_t offset = 0;
  std::int64_t numel = 0;
};

// Σ x² of every segment of the flat buffer `x`, in segment order, each as sum_of_squares
// (ops/adam.h) of that slice returns it on the same device: bit-identical to one call per
// segment. On a device all sums are taken there and come back in one copy (one wait). x is fp32,
// bf16 or fp16; 16-bit elements are widened exactly, so the sums of 16-bit weights are bit for bit
// those of their fp32 widening (the same squares in double, added in the same order).
std::vector<double> sums_of_squares(const DeviceContext& ctx, tensor::Tensor x,
                                    std::span<const SquaresSegment> segments);

}  // namespace mds::ops
