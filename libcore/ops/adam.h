// The optimizer step and the gradient norm over flat fp32 buffers (training.md §5.3, §5.4).
// Each op takes the DeviceContext it runs with (ops/device_context.h) and has an overload without
// one for host tensors.
#pragma once
#include <cstdint>

#include "ops/device_context.h"
#include "tensor/tensor.h"

namespace mds::ops {

struct AdamWConfig {
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
};

// apex FusedAdam with adam_w_mode = True and bias_correction = True, per element in fp32:
//   m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
//   update = (m/bc1) / (sqrt(v/bc2) + eps) + wd·p;  p = p − lr·update
// with bc1 = 1 − β1^step, bc2 = 1 − β2^step computed in double and rounded to float as apex's host
// code does. `step` is the already-incremented step count (≥ 1). All four tensors are fp32 with
// equal element counts (any shapes: flat partitions or single parameters).
// On a device the same statements run per element (bit-identical to the host).
void adamw_step(const DeviceContext& ctx, tensor::Tensor params, tensor::Tensor grads,
                tensor::Tensor exp_avg, tensor::Tensor exp_avg_sq, const AdamWConfig& config,
                std::int64_t step);

// adamw_step on the fp32 master `params`, and the new weights rounded to `low` (bf16 or fp16,
// params' element count; round to nearest even as ops::cast) in the same pass: the 16-bit
// wrappers' update followed by their master → params copy, bit-identical to adamw_step then cast.
void adamw_step_and_cast(const DeviceContext& ctx, tensor::Tensor params, tensor::Tensor grads,
                         tensor::Tensor exp_avg, tensor::Tensor exp_avg_sq,
                         const AdamWConfig& config, std::int64_t step, tensor::Tensor low);

// Σ x² of an fp32 tensor, accumulated in double in a fixed blocked order (independent of the
// thread count), for the global gradient norm: ranks add their partial sums, then take the root.
// On a device the order is a fixed one of its own (within 1e-12 of the host's) and the call waits
// for the result.
double sum_of_squares(const DeviceContext& ctx, tensor::Tensor x);
// sqrt(sum_of_squares(x)).
double l2_norm(const DeviceContext& ctx, tensor::Tensor x);

// The same on host tensors.
void adamw_step(tensor::Tensor params, tensor::Tensor grads, tensor::Tensor exp_avg,
                tensor::Tensor exp_avg_sq, const AdamWConfig& config, std::int64_t step);
double sum_of_squares(tensor::Tensor x);
double l2_norm(tensor::Tensor x);

}  // namespace mds::ops
