#pragma once

#include "model/param_buffer.h"

namespace mds::model {

// The parameter buffers one forward or backward reads, both laid out by the model's table.
// fp32 activations read everything from one fp32 buffer (the optimizer's compute copy), and a
// ParamBuffer converts to this implicitly. With 16-bit activations the linear layers' weights and
// the QKV bias (which the GEMM adds) come from `linear`, a buffer in the activation dtype (the
// optimizer's params(), as upstream keeps every parameter in the 16-bit type); the LayerNorm
// weights, the embedding tables and the biases the fused bias-GeLU and bias-dropout-add ops add
// come from `fp32` (the compute copy, the 16-bit params widened), because those ops take fp32
// parameters. Gradients are one fp32 buffer, passed the same way.
struct ModelParams {
  // Implicit: every fp32 call site passes a ParamBuffer.
  ModelParams(const ParamBuffer& all) : fp32(&all), linear(&all) {}
  ModelParams(const ParamBuffer& fp32_params, const ParamBuffer& linear_params)
      : fp32(&fp32_params), linear(&linear_params) {}

  const ParamBuffer* fp32;
  const ParamBuffer* linear;
};

}  // namespace mds::model
